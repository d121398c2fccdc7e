// See sluiced_policy_commands.h.
#include "sluiced_policy_commands.h"

#include <memory>
#include <optional>

#include "control/log.h"
#include "control/protocol.h"

namespace sluice::sluiced {

namespace {

using control::Json;
using control::Reply;

// A passed policy's bytes: a real one is a few KiB, and the control thread
// parses it while every other client waits, so a larger one is refused
// unparsed (a credentials file may be larger: it is parsed line by line).
constexpr size_t kMaxPassedPolicyBytes = size_t{1} << 20;

Reply show_policy(const control::PolicyPublisher& publisher, Json& w) {
  const std::shared_ptr<const dataplane::PolicySnapshot> cur_held = publisher.current();
  const dataplane::PolicySnapshot& cur = *cur_held;
  w["name"] = cur.policy.source.name;
  w["file"] = publisher.file();
  w["digest"] = digest_hex(cur.policy.digest);
  w["generation"] = cur.generation;
  w["service_ports"] = port_list(cur.service_ports);
  w["buckets"] = Json::array();
  for (const auto& b : cur.policy.buckets) w["buckets"].push_back(b.name);
  w["rules"] = Json::array();
  for (const auto& r : cur.policy.rules) w["rules"].push_back(r.name);
  return std::nullopt;
}

Reply check_policy(const PolicyLoading& loading, const Json& request, const control::PassedFile& file, Json& w) {
  std::string name;
  if (Reply r = control::passed_file_name(request, file, control::command::kPolicyCheck, name, kMaxPassedPolicyBytes)) {
    return r;
  }
  // The running daemon's own loader and compiler: what passes here is what
  // a reload accepts.
  const LoadedPolicy checked = loading.check_text(file.bytes, name);
  if (!checked.snapshot) return control::invalid_policy_response(name + " is not a usable policy", checked.errors);
  w["file"] = name;
  w["name"] = checked.snapshot->policy.source.name;
  w["digest"] = digest_hex(checked.snapshot->policy.digest);
  w["rules"] = checked.snapshot->policy.rules.size();
  w["buckets"] = checked.snapshot->policy.buckets.size();
  return std::nullopt;
}

Reply reload_policy(const control::PolicyPublisher& publisher, PolicyLoading& loading, const Json& request,
                    const control::PassedFile& file, Json& w) {
  std::string name;
  std::vector<std::string> refused;
  if (file.passed || control::member(request, control::arg::kFile) != nullptr) {
    if (Reply r = control::passed_file_name(request, file, "policy.reload with a file", name, kMaxPassedPolicyBytes)) {
      return r;
    }
    refused = loading.publish_text(file.bytes, name);
  } else {
    refused = loading.publish_config(name);
  }
  if (!refused.empty()) {
    return control::invalid_policy_response(name + " was not loaded; the running policy is unchanged", refused);
  }
  const std::shared_ptr<const dataplane::PolicySnapshot> now_active_held = publisher.current();
  const dataplane::PolicySnapshot& now_active = *now_active_held;
  const std::string digest = digest_hex(now_active.policy.digest);
  const std::string generation = std::to_string(now_active.generation);
  control::log(control::LogLevel::kNotice, control::LogEvent::kPolicy,
               "policy '" + now_active.policy.source.name + "' from " + name + " (digest " + digest + ", generation " +
                   generation + ") published",
               {{"SLUICE_POLICY", now_active.policy.source.name}, {"SLUICE_GENERATION", generation}});
  w["name"] = now_active.policy.source.name;
  w["file"] = name;
  w["digest"] = digest;
  w["generation"] = now_active.generation;
  return std::nullopt;
}

}  // namespace

void PolicyCommands::register_commands(control::CommandTable& table) const {
  table.add(control::command::kPolicyShow, [this](const Json&, Json& w) { return show_policy(publisher_, w); });
  table.add_with_file(control::command::kPolicyCheck,
                      [this](const Json& request, const control::PassedFile& file, Json& w) {
                        return check_policy(loading_, request, file, w);
                      });
  table.add_with_file(control::command::kPolicyReload,
                      [this](const Json& request, const control::PassedFile& file, Json& w) {
                        return reload_policy(publisher_, loading_, request, file, w);
                      });
}

}  // namespace sluice::sluiced

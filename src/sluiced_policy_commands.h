// The policy commands (policy.show, policy.check, policy.reload),
// registered by the policy's side of sluiced: they read what the publisher
// holds, and load and publish through the daemon's own loader
// (PolicyLoading), so that what passes a check is what a reload accepts.
#pragma once

#include <string>
#include <vector>

#include "control/command_source.h"
#include "control/policy_publisher.h"
#include "sluiced_policy.h"

namespace sluice::sluiced {

// How the running sluiced loads a policy: its credential hasher, its
// --service-ports, the running cluster section. `name` is what messages
// call the file (the one the client passed).
class PolicyLoading {
 public:
  virtual ~PolicyLoading() = default;
  // Loaded as a reload would load it, not published (policy.check).
  [[nodiscard]] virtual LoadedPolicy check_text(const std::string& text, const std::string& name) const = 0;
  // Loaded and published (policy.reload with a file): the reasons it was
  // refused, or none.
  [[nodiscard]] virtual std::vector<std::string> publish_text(const std::string& text, const std::string& name) = 0;
  // sluiced's own --config file loaded and published (policy.reload without
  // a file, as SIGHUP does): the reasons, and the file's path in `file`.
  [[nodiscard]] virtual std::vector<std::string> publish_config(std::string& file) = 0;

 protected:
  PolicyLoading() = default;
  PolicyLoading(const PolicyLoading&) = default;
  PolicyLoading& operator=(const PolicyLoading&) = default;
};

class PolicyCommands final : public control::CommandSource {
 public:
  PolicyCommands(const control::PolicyPublisher& publisher, PolicyLoading& loading)
      : publisher_(publisher), loading_(loading) {}
  void register_commands(control::CommandTable& table) const override;

 private:
  const control::PolicyPublisher& publisher_;
  PolicyLoading& loading_;
};

}  // namespace sluice::sluiced

// See http1_policy.h.
#include "http/http1_policy.h"

#include <string>
#include <string_view>
#include <vector>

#include "http/limiter_answer.h"

namespace sluice::http {

namespace {

// The limiter's field names, given ids by the parser's field set.
class FieldSetRegistry final : public limiter::FieldRegistry {
 public:
  explicit FieldSetRegistry(FieldSet& fields) noexcept : fields_(fields) {}
  std::optional<limiter::FieldId> track(std::string_view name) override { return fields_.add(name).id; }

 private:
  FieldSet& fields_;
};

}  // namespace

std::optional<Http1Policy> compile_http1_policy(const policy::Policy& p, const limiter::KeyHasher& credential_hasher,
                                                std::vector<policy::PolicyError>& errors) {
  std::optional<Http1Policy> out(std::in_place);
  out->stream.head.max_head_bytes = p.max_head_bytes;
  out->stream.head.max_fields = p.max_fields;
  out->stream.allow_upgrade = p.allow_upgrade;
  out->stream.allow_connect = p.allow_connect;
  out->stream.allow_h2_prior_knowledge = p.allow_h2_prior_knowledge;
  FieldSetRegistry registry(out->fields);
  if (!limiter::compile_policy(p, registry, credential_hasher, errors, *out)) return std::nullopt;
  // A rule's rate-limit fields go into an admitted response as one
  // inserted run of at most RateLimitFields::kMaxText bytes: a rule whose
  // buckets' names could make them longer is refused here, not found
  // without its fields under load.
  bool fits = true;
  for (const policy::RuleSpec& r : p.rules) {
    const limiter::CompiledRule* cr = out->rule_named(r.name);
    if (cr == nullptr) continue;
    std::vector<std::string_view> names{r.bucket};
    names.insert(names.end(), r.also_buckets.begin(), r.also_buckets.end());
    const size_t bound = ratelimit_fields_bound(cr->style, names);
    if (bound > limiter::RateLimitFields::kMaxText) {
      errors.push_back({p.file, r.mark.line, r.mark.column,
                        "rule " + r.name + ": its rate-limit fields could take " + std::to_string(bound) +
                            " bytes, more than the " + std::to_string(limiter::RateLimitFields::kMaxText) +
                            " an admitted response may get; shorten its buckets' names, charge fewer, or use "
                            "header_style: seed or none"});
      fits = false;
    }
  }
  if (!fits) return std::nullopt;
  return out;
}

}  // namespace sluice::http

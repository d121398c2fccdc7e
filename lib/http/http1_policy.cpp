// See http1_policy.h.
#include "http/http1_policy.h"

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
  return out;
}

}  // namespace sluice::http

// See sluiced_bucket_keys.h.
#include "sluiced_bucket_keys.h"

#include <span>

#include "control/credential_file.h"
#include "control/credential_registry.h"
#include "net/ip_address.h"

namespace sluice::sluiced {

// The rules of the current policy that charge `bucket`, and the kind of key
// they agree on (nullopt if they key it differently).
std::optional<policy::KeySpec::Kind> key_kind_of(const limiter::CompiledPolicy& p, const limiter::CompiledBucket& b) {
  std::optional<policy::KeySpec::Kind> kind;
  for (const limiter::CompiledRule& r : p.rules) {
    bool charges = &p.buckets[r.bucket] == &b;
    for (uint8_t i = 0; i < r.also_count; ++i) charges = charges || &p.buckets[r.also[i]] == &b;
    charges = charges || (r.penalty_bucket != limiter::CompiledRule::kNoPenalty && &p.buckets[r.penalty_bucket] == &b);
    if (!charges) continue;
    if (kind && *kind != r.key_kind) return std::nullopt;
    kind = r.key_kind;
  }
  return kind;
}

bool text_keyed(policy::KeySpec::Kind k) {
  return k == policy::KeySpec::Kind::kPathParam || k == policy::KeySpec::Kind::kHeader ||
         k == policy::KeySpec::Kind::kHost;
}

// The bucket key `text` names in `bucket` (as the rules that charge it key
// their requests); "" or the reason it names none.
std::string key_of(const limiter::LimiterState& limiter, const limiter::CompiledPolicy& p,
                   const limiter::CompiledBucket& b, const std::string& text, limiter::BucketKey& out) {
  using K = policy::KeySpec::Kind;
  const std::optional<K> kind = key_kind_of(p, b);
  if (!kind) return "bucket " + b.name + " is charged by rules with different keys; which one is ambiguous";
  const limiter::KeyHasher& h = limiter.bucket_hasher;
  const auto key = [&](std::span<const uint8_t> material) { return limiter::material_key(limiter, b, material); };
  auto bytes = [](const void* data, size_t n) { return std::span<const uint8_t>(static_cast<const uint8_t*>(data), n); };
  switch (*kind) {
    case K::kClientIp: {
      std::optional<net::IpAddress> ip = net::parse_ip(text);
      if (!ip) return "'" + text + "' is not an IP address (bucket " + b.name + " is keyed by client address)";
      if (!ip->is_v4()) ip = ip->prefix(p.client_ip.spec.ipv6_prefix);
      out = key(bytes(ip->bytes.data(), ip->bytes.size()));
      return {};
    }
    case K::kCredential: {
      const std::optional<limiter::Digest> digest = control::parse_digest_hex(text);
      if (!digest) return "bucket " + b.name + " is keyed by credential: give its hash (sluicectl credential hash)";
      // A cluster bucket's keys are made from the credential itself (the
      // same on every box), which its hash does not give back.
      if (b.cluster_salt != 0) return "bucket " + b.name + " is shared by the cluster and keyed by credential: its keys cannot be found from a hash";
      out = h.key(b.index, *digest);
      return {};
    }
    case K::kUser: {
      const uint64_t id = control::CredentialRegistry::user_id(text);
      out = key(bytes(&id, sizeof id));
      return {};
    }
    case K::kHost: {
      std::string lower = text;
      for (char& c : lower) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c | 0x20) : c;
      out = key(bytes(lower.data(), lower.size()));
      return {};
    }
    case K::kPathParam:
    case K::kHeader:
      out = key(bytes(text.data(), text.size()));
      return {};
    case K::kDestination:
      return "bucket " + b.name + " is keyed by destination; not shown by name";
  }
  return "unknown key kind";
}

}  // namespace sluice::sluiced

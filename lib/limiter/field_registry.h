// Where a policy's field names become ids: the protocol side records the
// values of the fields a policy tracks under ids it gives out, and the
// compiled policy reads them back by those ids (request.h, FieldValues).
// The limiter names the fields (a credential's header, a key's header, the
// client address's headers); the protocol side decides what a name means on
// its wire and how many it can record.
#pragma once

#include <optional>
#include <string_view>

#include "limiter/request.h"

namespace sluice::limiter {

class FieldRegistry {
 public:
  // The id `name`'s values are recorded under (the same id for the same
  // name, however it is spelt); nullopt when the protocol side cannot track
  // it (too many names, or one it cannot record).
  [[nodiscard]] virtual std::optional<FieldId> track(std::string_view name) = 0;

 protected:
  FieldRegistry() = default;
  FieldRegistry(const FieldRegistry&) = default;
  FieldRegistry& operator=(const FieldRegistry&) = default;
  ~FieldRegistry() = default;
};

}  // namespace sluice::limiter

// The credential commands (credentials.load, credentials.show,
// credential.add, credential.remove, credential.hash), registered by the
// credential registry's side of sluiced: they read and change the
// credential-to-user map, and hand each change to the cluster for the other
// boxes when there is one.
#pragma once

#include "control/cluster/cluster_service.h"
#include "control/command_source.h"
#include "control/credential_registry.h"

namespace sluice::sluiced {

class CredentialCommands final : public control::CommandSource {
 public:
  // `cluster` may be null: no cluster section, nothing replicated.
  CredentialCommands(control::CredentialRegistry& credentials, control::ClusterService* cluster)
      : credentials_(credentials), cluster_(cluster) {}
  void register_commands(control::CommandTable& table) const override;

 private:
  control::CredentialRegistry& credentials_;
  control::ClusterService* cluster_;
};

}  // namespace sluice::sluiced

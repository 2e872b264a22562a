// flotilla/gateway/cluster_registry.h
//
// The hub's clusters as the gateway reads them from the clusters bucket: each cluster's registration
// (clusters/cluster.<name>, what its agent reported), the hub admin's Cluster document (clusters/spec.<name>, from the
// Cluster CR), its deregistration tombstone, and the ClusterGroups' selectors (clusters/group.<ws>.<name>). From
// these it answers which clusters a ClusterGroup holds (the same rule as targeting, model/targeting.h: the group's
// selector over the cluster's effective labels, in the group's workspace) and which registered clusters have no
// Cluster CR yet. Only metadata is kept. Not thread-safe: the gateway guards it with its mutex.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "flotilla/model/resources.h"
#include "flotilla/model/targeting.h"

namespace flotilla::gateway {

class ClusterRegistry {
 public:
  //! A registration put (nullopt: removed).
  void setRegistration(const std::string& name, const std::optional<model::Cluster>& registration);
  //! An admin's Cluster document put (nullopt: removed).
  void setDocument(const std::string& name, const std::optional<model::Cluster>& document);
  //! The tombstone clusters/deregistered.<name> written (true) or removed.
  void setDeregistered(const std::string& name, bool deregistered);
  //! A ClusterGroup spec put (nullopt: removed), by its workspace and name.
  void setGroup(const std::string& workspace, const std::string& name, const std::optional<model::ClusterGroup>& group);

  //! The registered clusters in group `workspace`/`name`, sorted; nullopt when the group has no spec in KV.
  [[nodiscard]] std::optional<std::vector<std::string>> members(const std::string& workspace,
                                                                const std::string& name) const;
  //! The groups ("<ws>/<name>") of `workspace`: the ones whose members may change when a cluster there changes.
  [[nodiscard]] std::vector<std::string> groupsOf(const std::string& workspace) const;
  //! The workspace cluster `name` is in (its document's namespace, else its registration's); "" when unknown.
  [[nodiscard]] std::string workspaceOf(const std::string& name) const;
  //! A registered cluster that is not being deregistered: one that should have a Cluster CR.
  [[nodiscard]] bool wantsCr(const std::string& name) const;
  //! Every cluster with a registration.
  [[nodiscard]] std::vector<std::string> registered() const;

 private:
  struct Entry {
    std::optional<model::Cluster> registration;  //!< metadata only
    std::optional<model::Cluster> document;      //!< metadata only
    bool deregistered = false;
    model::Cluster effective;  //!< model::effectiveCluster of the two, kept up to date
  };
  void refresh(const std::string& name);

  std::map<std::string, Entry> clusters_;
  std::map<std::string, model::GroupInfo> groups_;  //!< by "<ws>/<name>"
};

}  // namespace flotilla::gateway

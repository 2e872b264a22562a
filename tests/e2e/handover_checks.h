// tests/e2e/handover_checks.h
//
// The guarantees of an ownership handover (docs/pipeline.md "Ownership handover"), checked the same way by the
// rename, move and crash tests: on every cluster the objects keep their UIDs and now carry the new bundle's owner
// annotation, the new bundle's reports contain no ErrApplied or WaitApplied and the first one is Ready (it was
// Ready within one pipeline round), and the old bundle's inventory and hub records are gone.
#pragma once

#include <gtest/gtest.h>

#include "handover_util.h"
#include "status_log.h"

namespace flotilla::e2e {

//! A handover in progress: what it should look like when it is done.
struct Handover {
  std::string gitrepo;     //!< the new bundle's GitRepo
  std::string old_bundle;  //!< "" when the objects come from a bundle that stays (a move of some objects)
  std::string new_bundle;
  std::vector<ObjectRef> objects;                        //!< the objects handed over
  std::vector<std::map<std::string, std::string>> uids;  //!< per cluster, before the handover
  uint64_t mark = 0;                                     //!< status stream position before the handover
  bool old_bundle_deleted = true;                        //!< the old bundle is gone (not only some objects)
};

//! Records the objects' UIDs on every cluster and the status stream position; call before the commit/apply.
inline Handover beginHandover(Hub& hub, StatusLog& status, const std::string& gitrepo, const std::string& old_bundle,
                              const std::string& new_bundle, const std::vector<ObjectRef>& objects) {
  Handover handover{.gitrepo = gitrepo, .old_bundle = old_bundle, .new_bundle = new_bundle, .objects = objects};
  for (size_t c = 0; c < hub.clusterCount(); ++c) {
    handover.uids.push_back(uidsOf(hub, c, objects));
    for (const auto& [object, uid] : handover.uids.back()) {
      EXPECT_FALSE(uid.empty()) << object << " must exist on cluster " << c << " before the handover";
    }
  }
  handover.mark = status.mark();
  return handover;
}

//! No report in `reports` is ErrApplied or WaitApplied.
inline bool neverStuck(const std::vector<RecordedStatus>& reports) {
  for (const auto& recorded : reports) {
    if (recorded.event.state == "ErrApplied" || recorded.event.state == "WaitApplied") {
      return false;
    }
  }
  return true;
}

//! Waits for the new bundle to be Ready at `commit` on every cluster, then checks every guarantee.
inline void expectHandedOver(Hub& hub, StatusLog& status, const Handover& handover, const std::string& commit,
                             std::chrono::seconds timeout = std::chrono::seconds(90)) {
  for (size_t c = 0; c < hub.clusterCount(); ++c) {
    const std::string cluster = hub.clusterName(c);
    ASSERT_TRUE(Hub::waitFor(
        [&] { return bundleState(hub, cluster, handover.gitrepo, handover.new_bundle, "Ready", commit); }, timeout))
        << handover.new_bundle << " not Ready at " << commit << " on " << cluster << "\n"
        << status.describe(cluster, handover.new_bundle, handover.mark);
    auto reports = status.of(cluster, handover.new_bundle, handover.mark);
    ASSERT_FALSE(reports.empty()) << "no report of " << handover.new_bundle << " on " << cluster;
    EXPECT_EQ(reports.front().event.state, "Ready") << "the new bundle must be Ready within one pipeline round: "
                                                    << status.describe(cluster, handover.new_bundle, handover.mark);
    EXPECT_TRUE(neverStuck(reports)) << status.describe(cluster, handover.new_bundle, handover.mark);
    if (!handover.old_bundle.empty()) {
      EXPECT_TRUE(neverStuck(status.of(cluster, handover.old_bundle, handover.mark)))
          << status.describe(cluster, handover.old_bundle, handover.mark);
    }
    EXPECT_EQ(uidsOf(hub, c, handover.objects), handover.uids.at(c))
        << "objects on " << cluster << " were deleted and re-created instead of handed over";
    for (const auto& object : handover.objects) {
      EXPECT_EQ(ownerOf(hub, c, object), qualified(handover.new_bundle)) << object.describe() << " on " << cluster;
      EXPECT_FALSE(terminating(hub, c, object)) << object.describe() << " is being deleted on " << cluster;
    }
    if (!handover.old_bundle.empty() && handover.old_bundle_deleted) {
      EXPECT_TRUE(Hub::waitFor([&] { return inventoryGone(hub, c, handover.old_bundle); }, timeout))
          << "the inventory of " << handover.old_bundle << " is still on " << cluster;
    }
  }
  if (!handover.old_bundle.empty() && handover.old_bundle_deleted) {
    EXPECT_TRUE(Hub::waitFor([&] { return bundleRecordsLeft(hub, handover.old_bundle).empty(); }, timeout))
        << "records of " << handover.old_bundle << " left:\n"
        << bundleRecordsLeft(hub, handover.old_bundle);
  }
}

//! True when `bundle` reports ErrApplied for an ownership conflict on `cluster` whose message names both bundles.
inline bool ownershipConflict(StatusLog& status, const std::string& cluster, const std::string& claimant,
                              const std::string& owner, uint64_t after) {
  for (const auto& recorded : status.of(cluster, claimant, after)) {
    const auto& event = recorded.event;
    if (event.state == "ErrApplied" && event.reason == "OwnershipConflict" &&
        event.message.find(qualified(owner)) != std::string::npos &&
        event.message.find(qualified(claimant)) != std::string::npos) {
      return true;
    }
  }
  return false;
}

//! Two GitRepos X and Y of one repository each, for an object `moved` that leaves X's bundle `app` and joins Y's:
//! X is committed (ConfigMaps moved and stays in namespace `ns`), applied and Ready on every cluster.
struct CrossRepoMove {
  std::string x, y, ns, x_url, y_url, x_bundle, y_bundle;
  ObjectRef moved;
  std::string x_first;  //!< X's first commit
};

//! Sets up a CrossRepoMove whose GitRepos are named "<prefix>x-<hex>" and "<prefix>y-<hex>". Callers check
//! HasFailure() afterwards.
inline CrossRepoMove crossRepoMove(Hub& hub, const std::string& prefix) {
  CrossRepoMove m;
  m.x = prefix + "x-" + randomHex(3);
  m.y = prefix + "y-" + randomHex(3);
  m.ns = "ns-" + m.x;
  m.x_bundle = bundleId(m.x, "app");
  m.y_bundle = bundleId(m.y, "app");
  m.moved = configMapRef(m.ns, "moved");
  auto repo_y = hub.git().createRepo(m.y);
  EXPECT_TRUE(repo_y.ok());
  if (!repo_y.ok()) {
    return m;
  }
  m.y_url = repo_y->http;
  const PushedRepo x = deployGitRepo(
      hub, m.x, bundleFiles("app", m.ns, {{"moved", configMap("moved", "x")}, {"stays", configMap("stays", "x")}}),
      {"app"});
  m.x_url = x.url;
  m.x_first = x.commit;
  return m;
}

//! The handover of `m.moved` from X's bundle to Y's: only the object moves, X's bundle stays.
inline Handover beginCrossRepoHandover(Hub& hub, StatusLog& status, const CrossRepoMove& m) {
  Handover handover = beginHandover(hub, status, m.y, m.x_bundle, m.y_bundle, {m.moved});
  handover.old_bundle_deleted = false;
  return handover;
}

//! Y claims `moved` (value "y"; with `y_own`, also its own ConfigMap y-own): Y's first commit, and Y applied.
inline std::string claimByY(Hub& hub, const CrossRepoMove& m, bool y_own) {
  std::map<std::string, std::string> objects = {{"moved", configMap("moved", "y")}};
  if (y_own) {
    objects.emplace("y-own", configMap("y-own", "y"));
  }
  auto y_first = hub.git().commitFiles(m.y, "main", bundleFiles("app", m.ns, objects), "y");
  EXPECT_TRUE(y_first.ok());
  EXPECT_TRUE(hub.apply(gitRepoYaml(m.y, m.y_url, {"app"})).ok());
  return y_first.ok() ? *y_first : std::string();
}

//! X lets go of `moved` (a commit deleting it); returns the commit.
inline std::string releaseByX(Hub& hub, const CrossRepoMove& m) {
  auto x_release = hub.git().deleteFiles(m.x, "main", {"app/moved.yaml"}, "x lets go of moved");
  EXPECT_TRUE(x_release.ok());
  return x_release.ok() ? *x_release : std::string();
}

}  // namespace flotilla::e2e

#include "flotilla/scheduler/records.h"

namespace flotilla::scheduler {

ClusterInfo clusterInfoOf(const model::Cluster& cluster) {
  return ClusterInfo{
      .name = cluster.metadata.name, .workspace = cluster.metadata.ns, .labels = cluster.metadata.labels};
}

Result<BundleInfo> bundleFromEvent(const events::BundleEvent& event, const BundleInfo* previous) {
  BundleInfo out;
  if (previous != nullptr) {
    out = *previous;
  }
  out.workspace = event.workspace;
  out.gitrepo = event.gitrepo;
  out.bundle = event.bundle;
  out.time = event.time;
  if (event.error) {
    out.error = event.error;
    out.error_commit = event.commit;
    out.error_time = event.time;
    return out;
  }
  auto targeting = targetingFrom(event);
  FLOTILLA_TRY(targeting);
  out.targeting = std::move(targeting).value();
  out.error.reset();
  out.error_commit.clear();
  out.error_time.clear();
  return out;
}

Result<BundleInfo> bundleFromRecord(const events::BundleRecord& record) {
  BundleInfo info{.workspace = record.workspace, .gitrepo = record.gitrepo, .bundle = record.bundle};
  if (record.last_good) {
    auto good = bundleFromEvent(*record.last_good, nullptr);
    FLOTILLA_TRY(good);
    info = std::move(good).value();
  }
  if (record.error) {
    info.error = record.error;
    info.error_commit = record.commit;
  }
  return info;
}

}  // namespace flotilla::scheduler

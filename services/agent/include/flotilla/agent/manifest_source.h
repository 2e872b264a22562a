// flotilla/agent/manifest_source.h
//
// Where the agent gets a deploy's manifest: from the hub, by request/reply on flotilla.manifest.<cluster>
// (docs/pipeline.md "Manifest delivery", events/manifest.h). The agent's credentials allow only its own cluster's
// subject and no read of the shared object store; the hub answers only for manifests the cluster's deployments
// reference. A manifest comes in chunks (each at most the NATS server's max_payload): the agent asks offset after
// offset, checks that every chunk names the same size and digest, and checks the whole against them at the end.
//
// Failures, by what the hub or the bus said:
//   no answer in time, no responder, Unavailable, a size or digest that does not match     retried here (backoff)
//   NotDeployed (the deployment record is written just after the DeployEvent is published) retried here (backoff)
//   Superseded (the deploy's bundle record has a newer generation: a newer deploy follows)  kConflict at once
//   NotFound (a deployment references it, the store has no such object)                   kNotFound at once
//   BadRequest, an unreadable reply                                                        kInternal at once
// Each retry is logged and counted (manifest_fetch_retries_total); after the last attempt the error is kTransient,
// so the deploy is retried later by the consumer runtime. Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "flotilla/bus/connection.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"

namespace flotilla::agent {

struct ManifestSourceOptions {
  std::chrono::milliseconds request_timeout{10000};  //!< one chunk's request
  int attempts = 6;                                  //!< per manifest, for the retried failures above
  std::chrono::milliseconds backoff_min{200};        //!< pause after the first failed attempt; doubles
  std::chrono::milliseconds backoff_max{5000};
};

//! The deploy a manifest is fetched for (sent with the request so the hub can answer Superseded); empty when the
//! fetch is not for a DeployEvent.
struct ManifestFor {
  std::string workspace;
  std::string bundle;
  int64_t generation = 0;
};

class ManifestSource {
 public:
  ManifestSource(std::shared_ptr<bus::Connection> connection, std::string cluster, Metrics& metrics,
                 ManifestSourceOptions options = {});
  //! The manifest's bytes, verified against the size and digest the hub sent (see the file comment for errors).
  //! Without `retry` one attempt only (rebuilding the watch after a restart, which has a fallback).
  Result<std::string> get(std::string_view manifest_id, bool retry = true, const ManifestFor& deploy = {});
  //! The cluster whose subject is asked on (the hub may answer the registration with another id than the flag).
  void setCluster(std::string cluster);

 private:
  //! One transfer, chunk by chunk; no retries.
  Result<std::string> fetch(const std::string& cluster, const std::string& manifest_id, const ManifestFor& deploy);
  [[nodiscard]] std::string cluster() const;

  std::shared_ptr<bus::Connection> connection_;
  Metrics& metrics_;
  ManifestSourceOptions options_;
  mutable std::mutex mutex_;  //!< guards cluster_
  std::string cluster_;
};

}  // namespace flotilla::agent

// Flux in the benchmark harness (issue 15): its CRDs applied to a harness API server from the controllers' own
// modules (scripts/setup --with-flux puts them beside the binaries), and source-controller and kustomize-controller
// started as plain processes with a kubeconfig, as `flux install` would run them in a cluster: leader election off
// (one replica), the artifact server on a free local port that kustomize-controller fetches from, health and
// metrics on free ports. Also the objects the benchmark gives them, and reading their Ready state back.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

#include "flotilla/core/json.h"
#include "flotilla/core/process.h"
#include "flotilla/core/result.h"
#include "flotilla/harness/kube_cluster.h"
#include "flotilla/kube/client.h"

namespace flotilla::bench {

inline constexpr const char* kFluxNamespace = "flux-system";

//! How the controllers are tuned; the defaults follow Flux's docs for many objects on one controller
//! ("vertical scaling": more workers, higher API client limits).
struct FluxTuning {
  int concurrent = 20;        //!< --concurrent of both controllers (Flux's default is 2; the docs suggest raising it)
  int kube_api_qps = 500;     //!< --kube-api-qps (default 50)
  int kube_api_burst = 1000;  //!< --kube-api-burst (default 300)
};

class FluxControllers {
 public:
  //! Applies the CRDs to `home` (waits until they are Established), creates flux-system and starts both controllers
  //! against `home`'s admin kubeconfig; waits for their /readyz. Logs go to `dir`/<controller>.log.
  static Result<std::unique_ptr<FluxControllers>> start(harness::KubeCluster& home, const std::string& dir,
                                                        const FluxTuning& tuning);
  ~FluxControllers();
  FluxControllers(const FluxControllers&) = delete;
  FluxControllers& operator=(const FluxControllers&) = delete;

  //! The controllers' process ids (source-controller, kustomize-controller).
  [[nodiscard]] std::vector<std::pair<std::string, pid_t>> pids() const;
  //! "v1.9.6" and how it was tuned, for the printed figures.
  [[nodiscard]] std::string describe() const;
  [[nodiscard]] std::string logTail(size_t lines = 30) const;
  //! SIGTERM both (their memory and CPU figures must be read before).
  void stop();

 private:
  FluxControllers() = default;
  Status startController(const std::string& name, const std::vector<std::string>& flags);

  std::string dir_;
  std::string kubeconfig_;
  FluxTuning tuning_;
  std::map<std::string, Process> processes_;
  std::map<std::string, int> health_ports_;
};

//! The tools dir (FLOTILLA_TOOLS_DIR, else <source>/.tools/bin); Flux's binaries are there once scripts/bench built
//! them.
std::string toolsDir();
//! True when both controllers and their CRDs are in the tools dir.
bool fluxBuilt();

//! A kubeconfig for `cluster`'s admin with the certificates inlined (Flux reads a Kustomization's spec.kubeConfig from
//! a Secret and cannot follow file paths into the harness's temp dir).
Result<std::string> inlineKubeconfig(const harness::KubeCluster& cluster);

//! `kubectl apply --server-side` of `yaml` to the cluster of `kubeconfig`.
Status kubectlApply(const std::string& kubeconfig, const std::string& yaml);

//! A GitRepository polled every `interval` (the benchmark triggers it as Flux's webhook Receiver does).
std::string gitRepositoryYaml(const std::string& name, const std::string& url, const std::string& interval);
//! A Kustomization of `path` from GitRepository `source`, `wait: true` (Ready only when every object it applied is
//! healthy: the same objects the Flotilla agent checks); `kubeconfig_secret` non-empty: applied to that cluster
//! (spec.kubeConfig.secretRef).
std::string kustomizationYaml(const std::string& name, const std::string& source, const std::string& path,
                              const std::string& interval, const std::string& kubeconfig_secret = "");

//! What Flux's webhook Receiver does when a push arrives: it sets reconcile.fluxcd.io/requestedAt on the
//! GitRepository, and source-controller fetches at once.
Status requestReconcile(kube::KubeClient& home, const std::string& gitrepository);

//! The commit of a GitRepository's artifact ("" while it has none).
std::string sourceRevision(kube::KubeClient& home, const std::string& gitrepository);

//! The commit a Kustomization last applied and whether it is Ready for it: Ready=True whose message names the
//! revision (so a Ready left from the previous revision does not count).
struct KustomizationState {
  std::string name;
  std::string applied_commit;  //!< the sha of status.lastAppliedRevision ("main@sha1:<sha>")
  bool ready = false;
};
//! Every Kustomization in flux-system.
Result<std::vector<KustomizationState>> kustomizations(kube::KubeClient& home);

}  // namespace flotilla::bench

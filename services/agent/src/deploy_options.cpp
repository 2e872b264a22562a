// What the DeployHandler does for the deployment options that change how a bundle is applied (docs/pipeline.md
// stage 5, services/agent/README.md "Options"):
//   unsupported fields      -> ErrApplied/InvalidOptions naming them (model::checkSupportedOptions), terminated
//   serviceAccount          -> objects applied, read and pruned as system:serviceaccount:<agent ns>:<name>
//   helm.timeoutSeconds     -> after an apply without errors, parked until healthy or the deadline (HealthTimeout)
//   helm.waitForJobs        -> Jobs count in that wait only with it
//   helm.atomic             -> a failed apply or health wait is followed by the last good manifest (deploy_apply.cpp)
//   deleteNamespace         -> the namespaces the agent created for the bundle go with it
#include <algorithm>
#include <set>

#include "flotilla/agent/deploy_handler.h"
#include "flotilla/core/log.h"
#include "flotilla/core/time.h"
#include "flotilla/model/option_support.h"

namespace flotilla::agent {

namespace {

constexpr std::chrono::milliseconds kHealthPoll{1000};
constexpr std::chrono::milliseconds kMinHealthPoll{100};

bool isJob(const ObjectRef& ref) {
  return ref.kind == "Job" && ref.group() == "batch";
}

}  // namespace

bool waitsForHealth(const model::BundleDeploymentOptions& options) {
  return options.helm && options.helm->timeout_seconds > 0;
}

bool healthSettled(const std::vector<ObjectOutcome>& outcomes, const model::BundleDeploymentOptions& options) {
  const bool wait_for_jobs = options.helm && options.helm->wait_for_jobs;
  return std::all_of(outcomes.begin(), outcomes.end(), [&](const ObjectOutcome& outcome) {
    return outcome.ready || (isJob(outcome.ref) && !wait_for_jobs);
  });
}

std::string healthDeadline(const model::BundleDeploymentOptions& options, Clock& clock) {
  return formatRfc3339(clock.now() + std::chrono::seconds(options.helm ? options.helm->timeout_seconds : 0));
}

std::chrono::milliseconds healthPoll(const std::string& wait_until, Clock& clock) {
  auto deadline = parseRfc3339(wait_until);
  if (!deadline) {
    return kMinHealthPoll;
  }
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - clock.now());
  return std::clamp(left, kMinHealthPoll, kHealthPoll);
}

std::string previousManifestOf(const Inventory& inventory) {
  if (inventory.applied && !inventory.deployment_id.empty()) {
    return inventory.deployment_id.substr(0, inventory.deployment_id.find(':'));  // manifestID:sha256(options)
  }
  return inventory.previous_manifest_id;
}

std::vector<ObjectRef> adoptedAfter(const Inventory& before, const ApplyResult& applied,
                                    const std::vector<ObjectRef>& kept) {
  std::set<std::string> owned;
  for (const auto& ref : kept) {
    owned.insert(ref.identity());
  }
  std::vector<ObjectRef> out;
  std::set<std::string> seen;
  for (const auto* list : {&before.adopted, &applied.adopted_unmanaged}) {
    for (const auto& ref : *list) {
      if (owned.contains(ref.identity()) && seen.insert(ref.identity()).second) {
        out.push_back(ref);
      }
    }
  }
  return out;
}

std::vector<std::string> createdNamespacesAfter(const Inventory& before, const ApplyResult& applied) {
  std::vector<std::string> out = before.created_namespaces;
  for (const auto& name : applied.created_namespaces) {
    if (std::find(out.begin(), out.end(), name) == out.end()) {
      out.push_back(name);
    }
  }
  return out;
}

BundleReport revertReport(const BundleReport& failure, const std::string& manifest_id, const BundleReport& revert) {
  BundleReport out = failure;
  out.state = model::BundleState::kErrApplied;
  std::string result = revert.state == model::BundleState::kReady
                           ? std::string("Ready")
                           : std::string(model::stateName(revert.state)) + " (" + revert.message + ")";
  out.message = truncateMessage(failure.message + "; atomic: reverted to the previous manifest " +
                                manifest_id.substr(0, 12) + ": " + result);
  return out;
}

// ---- DeployHandler --------------------------------------------------------------------------------------------

std::optional<Outcome> DeployHandler::refuseUnsupported(const events::DeployEvent& event,
                                                        const model::BundleDeploymentOptions& options,
                                                        const Delivery& delivery) {
  auto supported = model::checkSupportedOptions(options);
  if (supported.ok()) {
    return std::nullopt;
  }
  metrics_.counter("unsupported_options_total", "Deploys refused for an option Flotilla does not implement")
      .Increment();
  return rejectWithReport(event, delivery, kReasonInvalidOptions, supported.error().message, "invalid");
}

Result<kube::KubeClient*> DeployHandler::bundleClient(const model::BundleDeploymentOptions& options) {
  if (options.service_account.empty()) {
    return static_cast<kube::KubeClient*>(nullptr);
  }
  // Fleet's rule: the service account lives in the agent's namespace. Checked on every deploy, so one created
  // after a refusal is found.
  auto account = applier_.client().get("v1", "ServiceAccount", inventories_.ns(), options.service_account);
  if (!account.ok()) {
    if (account.error().kind == ErrorKind::kNotFound) {
      return fail(ErrorKind::kNotFound, "serviceAccount " + options.service_account + " does not exist in namespace " +
                                            inventories_.ns() + " (the agent namespace, where Fleet looks it up too)");
    }
    return fail(account.error());
  }
  std::lock_guard lock(clients_mutex_);
  auto& client = impersonating_[options.service_account];
  if (!client) {
    // Only the user: the API server derives a service account's groups itself, so the agent needs `impersonate`
    // on serviceaccounts and nothing on groups.
    client = applier_.client().impersonating(
        kube::Impersonation{.user = serviceAccountUser(inventories_.ns(), options.service_account), .groups = {}});
  }
  return client.get();
}

Outcome DeployHandler::serviceAccountMissing(const events::DeployEvent& event, const Delivery& delivery,
                                             const Error& error) {
  if (error.kind != ErrorKind::kNotFound) {
    return transientFailure(event, delivery, "service-account", error);
  }
  metrics_.counter("service_account_missing_total", "Deploys parked because their serviceAccount does not exist")
      .Increment();
  BundleReport missing = bundleFailure(model::BundleState::kErrApplied, kReasonServiceAccount, error.message);
  if (!alreadyReported(ownerOf(event.workspace, event.bundle), event.deployment_id, missing, true)) {
    log::warn("service account missing; deploy parked",
              {{"cluster", cluster_}, {"bundle", event.bundle}, {"error", error.message}});
    auto published = report(event, missing, event.deployment_id, {});
    if (!published.ok()) {
      return transientFailure(event, delivery, "report", published.error());
    }
  }
  return Outcome::wait(options_.park_fallback, "service-account");
}

Outcome DeployHandler::continueHealthWait(const events::DeployEvent& event,
                                          const model::BundleDeploymentOptions& options, const Inventory& inventory,
                                          const Delivery& delivery) {
  auto health = applier_.checkHealth(inventory.objects);
  if (!health.ok()) {
    return transientFailure(event, delivery, "health", health.error());
  }
  BundleReport state = summarize(*health);
  auto deadline = parseRfc3339(inventory.wait_until);
  const bool settled = healthSettled(*health, options);
  const bool expired = !settled && (!deadline || clock().now() >= *deadline);
  if (!settled && !expired) {
    state.message += "; waiting for health until " + inventory.wait_until + " (helm.timeoutSeconds)";
    if (!alreadyReported(ownerOf(event.workspace, event.bundle), inventory.deployment_id, state, true)) {
      if (auto published = report(event, state, inventory.deployment_id, inventory.objects); !published.ok()) {
        return transientFailure(event, delivery, "report", published.error());
      }
    }
    return Outcome::wait(healthPoll(inventory.wait_until, clock()), "health");
  }
  if (expired) {
    metrics_.counter("health_timeouts_total", "Deployments not healthy within helm.timeoutSeconds").Increment();
    log::warn("bundle not healthy within helm.timeoutSeconds",
              {{"cluster", cluster_}, {"bundle", event.bundle}, {"not_ready", state.message}});
    const int64_t timeout = options.helm ? options.helm->timeout_seconds : 0;
    BundleReport timed_out =
        bundleFailure(model::BundleState::kErrApplied, kReasonHealthTimeout,
                      "not healthy within " + std::to_string(timeout) + " s (helm.timeoutSeconds): " + state.message);
    timed_out.resources = state.resources;
    if (options.helm && options.helm->atomic && !inventory.previous_manifest_id.empty()) {
      return revertAfterTimeout(event, options, inventory, delivery, std::move(timed_out));
    }
    state = std::move(timed_out);
  }
  Inventory done = inventory;
  done.wait_until.clear();
  if (auto saved = writeInventory(done); !saved.ok()) {
    return transientFailure(event, delivery, "inventory", saved.error());
  }
  return reportThenAck(event, delivery, state, inventory.deployment_id, inventory.objects, false,
                       expired ? "error" : "applied");
}

Result<std::string> DeployHandler::deleteCreatedNamespaces(const Inventory& inventory,
                                                           const model::BundleDeploymentOptions& options) {
  if (!options.delete_namespace || inventory.created_namespaces.empty()) {
    return std::string();
  }
  auto inventories = inventories_.list();
  FLOTILLA_TRY(inventories);
  std::set<std::string> in_use;  // namespaces other bundles still have objects in, or list themselves
  for (const auto& other : *inventories) {
    if (other.workspace == inventory.workspace && other.bundle == inventory.bundle) {
      continue;
    }
    for (const auto& ref : other.objects) {
      in_use.insert(isNamespace(ref) ? ref.name : ref.ns);
    }
  }
  std::vector<std::string> doomed;
  std::vector<std::string> kept;
  for (const auto& name : inventory.created_namespaces) {
    (in_use.contains(name) ? kept : doomed).push_back(name);
  }
  auto client = bundleClient(options);
  FLOTILLA_TRY(client);
  auto errors = applier_.deleteNamespaces(doomed, *client);
  FLOTILLA_TRY(errors);
  std::string text;
  if (doomed.size() > errors->size()) {
    text += "; deleted " + std::to_string(doomed.size() - errors->size()) + " namespaces (deleteNamespace)";
  }
  for (const auto& name : kept) {
    text += "; kept namespace " + name + " (another bundle has objects in it or lists it)";
  }
  for (const auto& error : *errors) {
    text += "; " + error;
  }
  return text;
}

}  // namespace flotilla::agent

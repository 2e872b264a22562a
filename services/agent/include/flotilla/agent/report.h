// flotilla/agent/report.h
//
// Turning per-object results into a bundle's state (DESIGN.md: ErrApplied > ... > NotReady > Ready) and the
// StatusEvent the agent publishes on flotilla.status.<cluster>.<bundle>:
//   - any object failed to apply          -> ErrApplied, reason "ApplyFailed", the message names each failed
//                                            object "kind/namespace/name: <the API server's message>"; when every
//                                            failure is an ownership conflict: reason "OwnershipConflict" and the
//                                            conflict messages (both bundles named)
//   - else any object is not healthy      -> NotReady, reason "ResourcesNotReady", per-object messages
//   - else                                -> Ready
// Pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/agent/objects.h"
#include "flotilla/events/payloads.h"
#include "flotilla/model/state.h"

namespace flotilla::agent {

//! How many objects a StatusEvent lists at most (its `resources`), and names in its message.
inline constexpr size_t kMaxReportedResources = 50;
inline constexpr size_t kMaxMessageItems = 10;
//! Longest per-object message kept (API server messages can be long).
inline constexpr size_t kMaxObjectMessage = 1024;

// Machine-readable reasons.
inline constexpr std::string_view kReasonApplyFailed = "ApplyFailed";
inline constexpr std::string_view kReasonNotReady = "ResourcesNotReady";
inline constexpr std::string_view kReasonInvalidManifest = "InvalidManifest";
inline constexpr std::string_view kReasonInvalidOptions = "InvalidOptions";
inline constexpr std::string_view kReasonManifestNotFound = "ManifestNotFound";
inline constexpr std::string_view kReasonPruneFailed = "PruneFailed";
inline constexpr std::string_view kReasonPruneToEmpty = "PruneToEmptyRefused";
inline constexpr std::string_view kReasonDeleted = "Deleted";
inline constexpr std::string_view kReasonOrphaned = "Orphaned";
inline constexpr std::string_view kReasonOwnershipConflict = "OwnershipConflict";
inline constexpr std::string_view kReasonDependencyCycle = "DependencyCycle";
inline constexpr std::string_view kReasonUnmanagedObject = "UnmanagedObject";
inline constexpr std::string_view kReasonHealthTimeout = "HealthTimeout";
inline constexpr std::string_view kReasonServiceAccount = "ServiceAccountNotFound";
//! Every failure is an object outside --namespaces (scope.h), refused before any request.
inline constexpr std::string_view kReasonOutsideNamespaces = "OutsideNamespaces";

//! The result for one object of a bundle.
struct ObjectOutcome {
  ObjectRef ref;
  bool apply_failed = false;
  bool conflict = false;           //!< failed because another bundle owns it and no claim rule let this one take it
  bool unmanaged = false;          //!< failed because it exists, managed by no bundle, and takeOwnership is off
  bool adopted_unmanaged = false;  //!< it existed managed by no bundle and was adopted (takeOwnership)
  bool outside = false;            //!< refused before any request: outside --namespaces (scope.h)
  std::string error;               //!< why apply failed (the API server's message, or the conflict message)
  bool ready = false;
  std::string message;   //!< why it is not Ready
  std::string replaced;  //!< set when it was deleted and re-created (replacedMessage): said in the bundle's message
};

//! A bundle's state with the fields of a StatusEvent that describe it.
struct BundleReport {
  model::BundleState state = model::BundleState::kReady;
  std::string reason;
  std::string message;
  std::vector<events::ObjectResult> resources;  //!< objects that are not Ready, at most kMaxReportedResources
};

//! The bundle's state from its objects' outcomes (see the file comment).
BundleReport summarize(const std::vector<ObjectOutcome>& outcomes);
//! A report for a failure of the whole bundle (invalid manifest, missing manifest, ...).
BundleReport bundleFailure(model::BundleState state, std::string_view reason, std::string message);

//! "ConfigMap app/x is owned by bundle ws/a and also claimed by ws/b; ws/b takes it over when ws/a releases it".
std::string conflictMessage(const ObjectRef& ref, std::string_view owner, std::string_view claimant);

//! "ConfigMap app/x exists and is not managed by Flotilla (field managers: kubectl); set helm.takeOwnership to adopt
//! it" (Helm's wording for the same refusal).
std::string unmanagedMessage(const ObjectRef& ref, const std::vector<std::string>& managers);

//! Caps a message at `limit` bytes (adding "...") without splitting a UTF-8 sequence.
std::string truncateMessage(std::string text, size_t limit = kMaxObjectMessage);

}  // namespace flotilla::agent

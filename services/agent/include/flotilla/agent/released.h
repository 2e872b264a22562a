// flotilla/agent/released.h
//
// Objects a bundle released that nobody claimed yet, held before they are deleted (docs/pipeline.md "Ownership
// handover", Release): one ConfigMap per cluster,
//   name       flotilla-released, in the agent namespace
//   data       released.json = [{"apiVersion", "kind", "namespace", "name", "releasedBy", "releasedAt"}]
// releasedBy is the releasing bundle ("<workspace>/<bundle>"), releasedAt an RFC 3339 time. A bundle that claims a
// held object within the hold adopts it (rule `released`, the object and its UID kept); after the hold the reaper
// deletes it, but only while its owner annotation still names the releaser and no inventory lists it. Kept in the
// cluster, so a hold survives agent restarts.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/agent/objects.h"
#include "flotilla/core/json.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"
#include "flotilla/kube/client.h"

namespace flotilla::agent {

inline constexpr std::string_view kReleasedName = "flotilla-released";
inline constexpr std::string_view kReleasedDataKey = "released.json";

struct ReleasedObject {
  ObjectRef ref;
  std::string released_by;  //!< "<workspace>/<bundle>"
  std::string released_at;  //!< RFC 3339

  bool operator==(const ReleasedObject&) const = default;
};

//! The released.json document.
Json encodeReleased(const std::vector<ReleasedObject>& released);
//! Strict inverse of encodeReleased: kInvalid naming the field on a wrong shape.
Result<std::vector<ReleasedObject>> decodeReleased(const Json& value);

//! Reads and writes the hold list of one agent namespace.
class ReleasedStore {
 public:
  ReleasedStore(kube::KubeClient& client, std::string ns, Metrics& metrics)
      : client_(client), ns_(std::move(ns)), metrics_(metrics) {}

  //! Every held object (empty when the ConfigMap does not exist). A list that does not decode is logged, counted
  //! (released_invalid_total) and read as empty: the objects it named are left in place, never deleted by guess.
  Result<std::vector<ReleasedObject>> load();
  //! Replaces the list (server-side apply; the namespace is created when missing). An empty list deletes it.
  Status save(const std::vector<ReleasedObject>& released);
  //! Adds (or refreshes, by object identity) `entries`.
  Status add(const std::vector<ReleasedObject>& entries);
  //! Loads the list, lets `edit` change it and saves it when it changed, as one step: add, remove and update are
  //! serialised in this process (several bundles release and claim at once), so no change of one is lost.
  Status update(const std::function<void(std::vector<ReleasedObject>&)>& edit);
  //! The entry of `ref` released by `owner`, if held.
  Result<std::optional<ReleasedObject>> find(const ObjectRef& ref, std::string_view owner);
  //! Removes the entry of `ref` (done when it is not held).
  Status remove(const ObjectRef& ref);
  //! The released_objects gauge (set on every save).
  void setGauge(size_t held);

 private:
  kube::KubeClient& client_;
  std::string ns_;
  Metrics& metrics_;
  std::mutex edit_mutex_;  //!< one read-modify-write of the list at a time (add, remove, update)
};

}  // namespace flotilla::agent

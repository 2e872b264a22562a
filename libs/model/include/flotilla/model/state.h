// flotilla/model/state.h
//
// The seven bundle deployment states and their ranking (DESIGN.md, same ranks as Fleet's StateRank), and the
// StateSummary that the scheduler rolls up BundleDeployment -> Bundle -> GitRepo and -> Cluster -> ClusterGroup.
// Its JSON form is Fleet's BundleSummary ({ready, desiredReady, notReady, ..., nonReadyResources}).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"

namespace flotilla::model {

//! Numeric values are the ranks: a larger value is a worse state.
enum class BundleState {
  kReady = 1,
  kNotReady = 2,
  kPending = 3,
  kOutOfSync = 4,
  kModified = 5,
  kWaitApplied = 6,
  kErrApplied = 7,
};

//! Every state, worst first.
inline constexpr std::array<BundleState, 7> kAllStates = {
    BundleState::kErrApplied, BundleState::kWaitApplied, BundleState::kModified, BundleState::kOutOfSync,
    BundleState::kPending,    BundleState::kNotReady,    BundleState::kReady};

//! 1 (Ready) .. 7 (ErrApplied).
constexpr int stateRank(BundleState state) {
  return static_cast<int>(state);
}
//! The worse of two states (ErrApplied > WaitApplied > Modified > OutOfSync > Pending > NotReady > Ready).
constexpr BundleState worse(BundleState a, BundleState b) {
  return stateRank(a) >= stateRank(b) ? a : b;
}
//! "Ready", "NotReady", "Pending", "OutOfSync", "Modified", "WaitApplied", "ErrApplied".
std::string_view stateName(BundleState state);
//! The inverse of stateName; anything else is kInvalid.
Result<BundleState> parseState(std::string_view name);

//! One entry of a summary's non-ready list: which bundle (or cluster) is in which state and why.
struct NonReadyDetail {
  std::string name;
  BundleState state = BundleState::kNotReady;
  std::string message;

  bool operator==(const NonReadyDetail&) const = default;
};

//! Counts per state over a set of deployments, plus a few examples of what is not ready.
struct StateSummary {
  //! The cap on `non_ready`, as in Fleet (keeps status records small however many clusters fail).
  static constexpr size_t kMaxNonReadyDetails = 10;

  std::array<int64_t, 7> counts{};        //!< indexed by stateRank(state) - 1
  int64_t desired_ready = 0;              //!< how many items should be Ready (every item added)
  std::vector<NonReadyDetail> non_ready;  //!< worst state first, then by name; at most kMaxNonReadyDetails

  [[nodiscard]] int64_t count(BundleState state) const { return counts[stateRank(state) - 1]; }
  [[nodiscard]] int64_t ready() const { return count(BundleState::kReady); }
  //! Every desired item is Ready (also true for an empty summary).
  [[nodiscard]] bool isReady() const { return ready() == desired_ready; }
  //! The worst state with a non-zero count; Ready when empty.
  [[nodiscard]] BundleState worst() const;
  //! Counts one more item in `state`; a non-Ready item with a name also becomes a detail (within the cap).
  void add(BundleState state, std::string name = {}, std::string message = {});
  //! Adds another summary's counts and details (details re-sorted and capped).
  void merge(const StateSummary& other);
  //! A one-line human summary in Fleet's style: "ErrApplied(1), NotReady(2) [c1: boom; c2: pulling image]",
  //! or "" when ready.
  [[nodiscard]] std::string describe() const;

  bool operator==(const StateSummary&) const = default;
};

//! Fleet's BundleSummary JSON: zero counts omitted except ready and desiredReady; details as nonReadyResources
//! [{name, bundleState, message}].
Json encodeStateSummary(const StateSummary& summary);
//! Strict inverse of encodeStateSummary; errors name the field ("summary.nonReadyResources[0].bundleState: ...").
Result<StateSummary> decodeStateSummary(const Json& value, std::string_view path = "summary");

}  // namespace flotilla::model

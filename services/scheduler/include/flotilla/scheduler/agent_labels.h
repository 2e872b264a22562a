// flotilla/scheduler/agent_labels.h
//
// Which labels an agent's own registration may set for targeting (--agent-labels). Labels decide which bundles
// reach a cluster, and so which rendered manifests (Secrets included) its agent receives: an agent that could pick
// its labels could pull another team's bundles. So the labels that target are the hub's — a Cluster document's
// (clusters/spec.<name>) — and a reported label counts only where the hub admin allows its key.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/result.h"
#include "flotilla/model/labels.h"

namespace flotilla::scheduler {

class AgentLabelPolicy {
 public:
  //! None allowed (the default): targeting labels come only from Cluster documents.
  AgentLabelPolicy() = default;
  //! Every reported label counts (a hub whose agents are all trusted alike).
  static AgentLabelPolicy all();
  //! A comma-separated list of label keys; `prefix*` allows every key starting with prefix (e.g.
  //! `example.com/*`), `*` every key, "" or `none` none. A malformed key is kInvalid naming it.
  static Result<AgentLabelPolicy> parse(std::string_view list);

  [[nodiscard]] bool allows(std::string_view key) const;
  //! The part of `reported` that counts; the keys left out are appended to `left_out`.
  [[nodiscard]] model::Labels filter(const model::Labels& reported, std::vector<std::string>& left_out) const;
  //! The list as --agent-labels takes it ("none" when empty).
  [[nodiscard]] std::string describe() const;

 private:
  std::vector<std::string> keys_;      //!< exact keys
  std::vector<std::string> prefixes_;  //!< "" = every key
};

}  // namespace flotilla::scheduler

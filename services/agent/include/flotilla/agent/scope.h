// flotilla/agent/scope.h
//
// --namespaces: the namespaces an agent may deploy to, for a ServiceAccount bound by Roles in those namespaces only
// (the agent chart's rbac.mode=namespaced). With a list the agent refuses, before any request, every bundle object
// that is cluster-scoped (Namespaces and CRDs included) or lands in another namespace (ErrApplied naming the object
// and the list; the bundle's other objects are still applied); it never creates namespaces (the listed ones must
// exist), and its drift and health watches list and watch per namespace instead of across all namespaces. Without
// the flag (an empty scope) nothing is restricted.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/agent/objects.h"
#include "flotilla/agent/report.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"

namespace flotilla::agent {

class NamespaceScope {
 public:
  NamespaceScope() = default;
  //! `namespaces` sorted, each once (parse makes them so); empty = unrestricted.
  explicit NamespaceScope(std::vector<std::string> namespaces) : namespaces_(std::move(namespaces)) {}

  //! --namespaces: "a,b" (spaces around names allowed). Empty text = unrestricted. A name that is not a namespace
  //! name (DNS-1123 label), an empty item or a name given twice is kInvalid naming the flag and the name.
  static Result<NamespaceScope> parse(std::string_view text);

  [[nodiscard]] bool restricted() const { return !namespaces_.empty(); }
  [[nodiscard]] const std::vector<std::string>& namespaces() const { return namespaces_; }
  //! Whether a namespaced object may go to `ns` (always, when unrestricted).
  [[nodiscard]] bool allows(std::string_view ns) const;
  //! Why `ref` (placed: its ns is empty exactly when it is cluster-scoped) may not be deployed, or nullopt when it
  //! may: "ClusterRole x is cluster-scoped; this agent may deploy only to namespaces a, b (--namespaces)".
  [[nodiscard]] std::optional<std::string> refusal(const ObjectRef& ref) const;
  //! "a, b".
  [[nodiscard]] std::string describe() const;

 private:
  std::vector<std::string> namespaces_;
};

//! The failed outcome of a placed object `scope` refuses (ErrApplied with the refusal, `outside` set), logged and
//! counted in outside_namespaces_total{scope=cluster|namespace}; nullopt when the scope allows it.
std::optional<ObjectOutcome> refuseOutside(const NamespaceScope& scope, const ObjectRef& ref, std::string_view owner,
                                           Metrics& metrics);

}  // namespace flotilla::agent

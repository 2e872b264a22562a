#include "flotilla/agent/scope.h"

#include <algorithm>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/model/labels.h"

namespace flotilla::agent {

Result<NamespaceScope> NamespaceScope::parse(std::string_view text) {
  std::vector<std::string> names;
  if (trim(text).empty()) {
    return NamespaceScope();
  }
  for (const auto& item : split(text, ',')) {
    std::string name = trim(item);
    if (name.empty()) {
      return fail(ErrorKind::kInvalid, "--namespaces: empty namespace name in \"" + std::string(text) + "\"");
    }
    if (!model::isDns1123Label(name)) {
      return fail(ErrorKind::kInvalid, "--namespaces: \"" + name +
                                           "\" is not a namespace name (lower-case letters, digits and '-', at most "
                                           "63, starting and ending with a letter or digit)");
    }
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      return fail(ErrorKind::kInvalid, "--namespaces: namespace \"" + name + "\" is listed twice");
    }
    names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return NamespaceScope(std::move(names));
}

bool NamespaceScope::allows(std::string_view ns) const {
  return !restricted() || std::binary_search(namespaces_.begin(), namespaces_.end(), ns);
}

std::optional<std::string> NamespaceScope::refusal(const ObjectRef& ref) const {
  if (!restricted()) {
    return std::nullopt;
  }
  const std::string allowed = "this agent may deploy only to namespaces " + describe() + " (--namespaces)";
  if (ref.ns.empty()) {
    std::string text = ref.kind + " " + ref.name + " is cluster-scoped; " + allowed;
    if (isNamespace(ref)) {
      text += ", which must exist: it does not create namespaces";
    }
    return text;
  }
  if (allows(ref.ns)) {
    return std::nullopt;
  }
  return ref.kind + " " + ref.ns + "/" + ref.name + " is in namespace " + ref.ns + "; " + allowed;
}

std::string NamespaceScope::describe() const {
  std::string text;
  for (const auto& ns : namespaces_) {
    text += (text.empty() ? "" : ", ") + ns;
  }
  return text;
}

std::optional<ObjectOutcome> refuseOutside(const NamespaceScope& scope, const ObjectRef& ref, std::string_view owner,
                                           Metrics& metrics) {
  auto refusal = scope.refusal(ref);
  if (!refusal) {
    return std::nullopt;
  }
  metrics
      .counter("outside_namespaces_total",
               "Bundle objects refused before any request because --namespaces does not allow them, by scope",
               {{"scope", ref.ns.empty() ? "cluster" : "namespace"}})
      .Increment();
  log::warn("refusing an object outside --namespaces",
            {{"object", ref.describe()}, {"owner", std::string(owner)}, {"error", *refusal}});
  return ObjectOutcome{.ref = ref, .apply_failed = true, .outside = true, .error = std::move(refusal).value()};
}

}  // namespace flotilla::agent

// flotilla/model/labels.h
//
// Kubernetes label selectors, the way Fleet targets clusters and cluster groups: the structured form
// (matchLabels + matchExpressions, as in GitRepo.spec.targets[].clusterSelector) and the string form
// ("env=prod,tier!=web,region in (a,b),!legacy") used by the CLI's -l flag. Also the name and label syntax
// checks Kubernetes applies (DNS-1123 names, qualified label keys, label values).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"

namespace flotilla::model {

//! A label (or annotation) set, sorted by key.
using Labels = std::map<std::string, std::string, std::less<>>;

//! The operators of metav1.LabelSelectorRequirement.
enum class SelectorOperator { kIn, kNotIn, kExists, kDoesNotExist };

//! One matchExpressions entry: In/NotIn need values, Exists/DoesNotExist must have none.
struct SelectorRequirement {
  std::string key;
  SelectorOperator op = SelectorOperator::kExists;
  std::vector<std::string> values;

  bool operator==(const SelectorRequirement&) const = default;
};

//! A metav1.LabelSelector. All parts are ANDed; an empty selector matches every label set (as in Kubernetes).
struct LabelSelector {
  Labels match_labels;
  std::vector<SelectorRequirement> match_expressions;

  //! True when every matchLabels pair and every expression holds for `labels`.
  [[nodiscard]] bool matches(const Labels& labels) const;
  //! No labels and no expressions (matches everything).
  [[nodiscard]] bool empty() const { return match_labels.empty() && match_expressions.empty(); }

  bool operator==(const LabelSelector&) const = default;
};

//! "In", "NotIn", "Exists", "DoesNotExist".
std::string_view operatorName(SelectorOperator op);
//! The inverse of operatorName (case-sensitive, as the Kubernetes API is).
Result<SelectorOperator> parseOperator(std::string_view name);

//! Checks keys, values and operator/value rules. The error message starts with `path` when given
//! ("spec.targets[0].clusterSelector.matchExpressions[1]: operator In needs at least one value").
Status validateSelector(const LabelSelector& selector, std::string_view path = {});

//! Parses the Kubernetes string form: comma-separated requirements, each one of `key`, `!key`, `key=value`,
//! `key==value`, `key!=value`, `key in (v1,v2)`, `key notin (v1,v2)`. Equalities go to matchLabels (unless the key
//! repeats), the rest to matchExpressions. `key!=v` becomes NotIn [v] (true when the label is absent, as in
//! Kubernetes). The empty string is the empty selector. Set-based `>`/`<` are not supported (kInvalid).
Result<LabelSelector> parseSelector(std::string_view text);

//! The string form of a selector, accepted by parseSelector ("env=prod,region in (a,b),!legacy").
std::string formatSelector(const LabelSelector& selector);

//! The JSON form {matchLabels, matchExpressions}; empty parts are omitted.
Json encodeSelector(const LabelSelector& selector);

//! A label key: optional DNS-1123 subdomain prefix (<=253) + "/" + name (1-63 of [A-Za-z0-9._-], alnum at both ends).
Status validateLabelKey(std::string_view key);
//! A label value: empty, or 1-63 of [A-Za-z0-9._-] starting and ending alphanumeric.
Status validateLabelValue(std::string_view value);
//! Every key and value of `labels`; the message names `path` and the offending key.
Status validateLabels(const Labels& labels, std::string_view path);

//! RFC 1123 subdomain as Kubernetes checks object names: <=253 chars, [a-z0-9.-], alnum at both ends.
bool isDns1123Subdomain(std::string_view name);
//! RFC 1123 label as Kubernetes checks namespaces: <=63 chars, [a-z0-9-], alnum at both ends.
bool isDns1123Label(std::string_view name);

}  // namespace flotilla::model

// flotilla/model/option_support.h
//
// Which deployment options Flotilla acts on. Every field of BundleDeploymentOptions is either implemented (by the
// bundler's render or by the agent) or listed here as unsupported: a bundle that sets an unsupported field is
// refused with an error naming the field, at render time (the bundler, a RenderError naming fleet.yaml) and again
// by the agent (ErrApplied/InvalidOptions), so no option is ever accepted and silently ignored (DESIGN.md
// "Resources"). This file is the one place that list lives.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/result.h"
#include "flotilla/model/options.h"

namespace flotilla::model {

//! One option field `options` sets that Flotilla does not implement: its path ("helm.valuesFrom") and why.
struct UnsupportedOption {
  std::string field;
  std::string why;
};

//! The unsupported fields `options` sets (empty when every field it sets is implemented).
std::vector<UnsupportedOption> unsupportedOptionFields(const BundleDeploymentOptions& options);

//! kInvalid naming each unsupported field under `path` ("options.helm.valuesFrom: not supported: ..."), else ok.
Status checkSupportedOptions(const BundleDeploymentOptions& options, std::string_view path = "options");

//! Every field path the decoder knows in BundleDeploymentOptions ("defaultNamespace", "helm.chart", ...; the
//! leaves: a nested object's own fields, not the object). Tests compare it with their table of what implements
//! each field, so a field added to the decoder without a decision fails them.
std::vector<std::string> optionFieldPaths();

}  // namespace flotilla::model

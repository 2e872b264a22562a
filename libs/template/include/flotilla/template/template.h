// flotilla/template/template.h
//
// Fleet's `${ }` value templating: a subset of Go's text/template with the delimiters `${` and `}`, executed with
// missingkey=error over a JSON context (for fleet.yaml: .ClusterName, .ClusterNamespace, .ClusterLabels,
// .ClusterAnnotations, .ClusterValues), with a documented subset of sprig (README.md lists every function).
//
// Supported: text and actions; `${-` / `-}` whitespace trimming; comments `${/* ... */}`; pipelines `a | b c`;
// fields `.A.B` (map keys, missing key = error), `.`, `$`, `$.A`; string ("..." with Go escapes, `raw`), number,
// true/false/nil literals; parenthesised pipelines; `if` / `else if` / `else` / `end`. Not supported (clear error):
// range, with, define, template, block, variables other than `$`.
//
// Errors are kInvalid, the message says what failed and where in the text ("column 7: unsupported function
// \"env\""); callers add the file and the value path.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"

namespace flotilla::templating {

//! True when `text` contains a `${` delimiter (it is a template, not a plain string).
bool hasTemplate(std::string_view text);

//! Parses and executes `text`, printing values like Go's text/template (strings as is, numbers, true/false,
//! nil as "<no value>", maps as map[k:v], lists as [a b]).
Result<std::string> render(std::string_view text, const Json& context);

//! Evaluates a template string that stands for a value (a helm value):
//!   - exactly one action (surrounding whitespace allowed): a map or list result keeps its type; a scalar result
//!     is printed and read back as a YAML scalar, as Fleet does by templating the values' YAML text ("3" -> 3,
//!     "true" -> true, `${ toJson .ClusterLabels }` -> a map); an empty result stays "";
//!   - anything else (text around or between actions): the rendered string.
Result<Json> evaluateValue(std::string_view text, const Json& context);

//! The functions the evaluator knows (sorted), for documentation and error messages.
std::vector<std::string> supportedFunctions();

}  // namespace flotilla::templating

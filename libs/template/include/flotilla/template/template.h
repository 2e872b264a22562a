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

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"

namespace flotilla::templating {

//! What one template evaluation may cost. A few hundred bytes of nested `replace` calls (each one multiplying its
//! input) would otherwise build gigabytes, so every limit is checked while evaluating and refused with an error
//! naming the limit and the column of the action. The defaults are far above what a fleet.yaml value needs (a
//! value is a name, a number or a small block of YAML) and keep one value's cost to a few MB and a second.
struct Limits {
  //! The rendered text, and every string a function builds (checked before building when the size is known).
  size_t max_output_bytes = 1u << 20;
  //! Actions, operands and function calls evaluated. Without range/with a template is evaluated about once per
  //! token, so this bounds work on top of the template's length.
  size_t max_steps = 100'000;
  //! Wall-clock time of one evaluation (checked at every step).
  std::chrono::milliseconds max_time{1000};
};

//! True when `text` contains a `${` delimiter (it is a template, not a plain string).
bool hasTemplate(std::string_view text);

//! Parses and executes `text`, printing values like Go's text/template (strings as is, numbers, true/false,
//! nil as "<no value>", maps as map[k:v], lists as [a b]).
Result<std::string> render(std::string_view text, const Json& context, const Limits& limits = {});

//! Evaluates a template string that stands for a value (a helm value):
//!   - exactly one action (surrounding whitespace allowed): a map or list result keeps its type; a scalar result
//!     is printed and read back as a YAML scalar, as Fleet does by templating the values' YAML text ("3" -> 3,
//!     "true" -> true, `${ toJson .ClusterLabels }` -> a map); an empty result stays "";
//!   - anything else (text around or between actions): the rendered string.
Result<Json> evaluateValue(std::string_view text, const Json& context, const Limits& limits = {});

//! The functions the evaluator knows (sorted), for documentation and error messages.
std::vector<std::string> supportedFunctions();

}  // namespace flotilla::templating

// The function table: Go's builtins and the sprig functions Fleet allows, registered by group.
#include "flotilla/core/ascii.h"
#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"
#include "flotilla/template/template.h"
#include "template_internal.h"

namespace flotilla::templating::detail {
namespace {

Result<Json> stringFunction(const std::string& name, const Args& args, size_t index,
                            const std::function<Json(const std::string&)>& apply) {
  auto text = needString(name, args[index], "the argument");
  if (!text.ok()) {
    return fail(text.error());
  }
  return apply(*text);
}

//! A function of two strings, both converted as sprig does; `first` and `second` name them in errors.
Function twoStrings(const std::string& name, const char* first, const char* second,
                    std::function<Json(const std::string&, const std::string&)> apply) {
  return [name, first, second, apply = std::move(apply)](const Args& a) -> Result<Json> {
    auto x = needString(name, a[0], first);
    auto y = needString(name, a[1], second);
    if (!x.ok() || !y.ok()) {
      return fail(x.ok() ? y.error() : x.error());
    }
    return apply(*x, *y);
  };
}

bool hasSuffixText(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

//! One step of `index`: a map key or a list position into `current`.
Result<Json> indexStep(const Json& current, const Json& key) {
  if (current.isObject()) {
    if (!key.isString()) {
      return fail(argError("index", "a map key must be a string"));
    }
    const Json* next = current.find(key.asString());
    return next != nullptr ? *next : Json();  // Go: the zero value for a missing key
  }
  if (current.isArray()) {
    if (!key.isInt()) {
      return fail(argError("index", "a list index must be an integer"));
    }
    int64_t k = key.asInt();
    if (k < 0 || static_cast<size_t>(k) >= current.asArray().size()) {
      return fail(argError("index", "index out of range: " + std::to_string(k)));
    }
    return Json(current.asArray()[static_cast<size_t>(k)]);
  }
  if (current.isNull()) {
    return Json();
  }
  return fail(argError("index", "cannot index " + jsonTypeName(current)));
}

Result<Json> indexValue(const Args& a) {
  Json current = a[0];
  for (size_t i = 1; i < a.size() && !current.isNull(); ++i) {
    auto next = indexStep(current, a[i]);
    FLOTILLA_TRY(next);
    current = std::move(next).value();
  }
  return current;
}

//! eq: true when the first argument equals any of the others.
Result<Json> equalsAny(const Args& a) {
  for (size_t i = 1; i < a.size(); ++i) {
    auto c = compare("eq", a[0], a[i], false);
    FLOTILLA_TRY(c);
    if (*c == 0) {
      return Json(true);
    }
  }
  return Json(false);
}

//! ne/lt/le/gt/ge: `accept` says which orders (-1, 0, 1) make the result true.
Function comparison(const std::string& name, std::function<bool(int)> accept) {
  return [name, accept = std::move(accept)](const Args& a) -> Result<Json> {
    auto c = compare(name, a[0], a[1], name != "ne");
    FLOTILLA_TRY(c);
    return Json(accept(*c));
  };
}

Result<Json> lengthOf(const Args& a) {
  if (a[0].isString()) {
    return Json(static_cast<int64_t>(a[0].asString().size()));
  }
  if (a[0].isArray() || a[0].isObject()) {
    return Json(static_cast<int64_t>(a[0].size()));
  }
  return fail(argError("len", "len of " + jsonTypeName(a[0])));
}

void addBuiltins(FunctionTable& t) {
  t["and"] = {1, -1, nullptr};  // short-circuit: evaluated by the executor
  t["or"] = {1, -1, nullptr};
  t["not"] = {1, 1, [](const Args& a) -> Result<Json> { return Json(!truthy(a[0])); }};
  t["len"] = {1, 1, lengthOf};
  t["index"] = {1, -1, indexValue};
  t["eq"] = {2, -1, equalsAny};
  t["ne"] = {2, 2, comparison("ne", [](int order) { return order != 0; })};
  t["lt"] = {2, 2, comparison("lt", [](int order) { return order < 0; })};
  t["le"] = {2, 2, comparison("le", [](int order) { return order <= 0; })};
  t["gt"] = {2, 2, comparison("gt", [](int order) { return order > 0; })};
  t["ge"] = {2, 2, comparison("ge", [](int order) { return order >= 0; })};
}

Result<Json> printValues(const Args& a) {
  std::string out;
  for (size_t i = 0; i < a.size(); ++i) {
    // Go's fmt.Sprint adds spaces between operands when neither is a string.
    if (i > 0 && !a[i].isString() && !a[i - 1].isString()) {
      out += ' ';
    }
    out += print(a[i]);
  }
  return Json(out);
}

Result<Json> quoteValues(const Args& a, bool single) {
  std::string out;
  for (const auto& v : a) {
    if (v.isNull()) {
      continue;  // sprig skips nil
    }
    out += out.empty() ? "" : " ";
    out += single ? "'" + print(v) + "'" : goQuote(print(v));
  }
  return Json(out);
}

void addFormatting(FunctionTable& t) {
  t["print"] = {0, -1, printValues};
  t["printf"] = {1, -1, [](const Args& a) -> Result<Json> {
                   auto text = sprintf(a);
                   FLOTILLA_TRY(text);
                   return Json(*text);
                 }};
  t["toString"] = {1, 1, [](const Args& a) -> Result<Json> { return Json(print(a[0])); }};
  t["quote"] = {0, -1, [](const Args& a) { return quoteValues(a, false); }};
  t["squote"] = {0, -1, [](const Args& a) { return quoteValues(a, true); }};
  t["toJson"] = {1, 1, [](const Args& a) -> Result<Json> { return Json(a[0].dump()); }};
  t["toYaml"] = {1, 1, [](const Args& a) -> Result<Json> {
                   std::string text = toYaml(a[0]);
                   while (!text.empty() && text.back() == '\n') {
                     text.pop_back();  // Helm's toYaml trims the trailing newline
                   }
                   return Json(text);
                 }};
}

Result<Json> firstTruthy(const Args& a) {
  for (const auto& v : a) {
    if (truthy(v)) {
      return v;
    }
  }
  return Json();
}

Result<Json> hasKey(const Args& a) {
  if (!a[0].isObject() && !a[0].isNull()) {
    return fail(argError("hasKey", "the first argument must be a map, got " + jsonTypeName(a[0])));
  }
  auto key = needString("hasKey", a[1], "the key");
  FLOTILLA_TRY(key);
  return Json(a[0].isObject() && a[0].contains(*key));
}

void addSprigLogic(FunctionTable& t) {
  t["default"] = {2, 2, [](const Args& a) -> Result<Json> { return truthy(a[1]) ? a[1] : a[0]; }};
  t["empty"] = {1, 1, [](const Args& a) -> Result<Json> { return Json(!truthy(a[0])); }};
  t["coalesce"] = {1, -1, firstTruthy};
  t["ternary"] = {3, 3, [](const Args& a) -> Result<Json> { return truthy(a[2]) ? a[0] : a[1]; }};
  t["hasKey"] = {2, 2, hasKey};
}

Result<Json> replaceAll(const Args& a) {
  auto from = needString("replace", a[0], "the old string");
  auto to = needString("replace", a[1], "the new string");
  auto text = needString("replace", a[2], "the string");
  if (!from.ok() || !to.ok() || !text.ok()) {
    return fail(!from.ok() ? from.error() : (!to.ok() ? to.error() : text.error()));
  }
  if (from->empty()) {
    return Json(*text);
  }
  // The size is known before building: a replacement longer than what it replaces multiplies the input, and a
  // few nested calls would otherwise build gigabytes.
  size_t hits = 0;
  for (size_t hit = text->find(*from); hit != std::string::npos; hit = text->find(*from, hit + from->size())) {
    ++hits;
  }
  if (to->size() > from->size() && hits > 0) {
    const size_t room = maxValueBytes() > text->size() ? maxValueBytes() - text->size() : 0;
    if (to->size() - from->size() > room / hits) {
      return fail(valueTooLarge("replace"));
    }
  }
  std::string out;
  out.reserve(text->size() + (hits * to->size()));
  size_t at = 0;
  for (size_t hit; (hit = text->find(*from, at)) != std::string::npos; at = hit + from->size()) {
    out += text->substr(at, hit - at) + *to;
  }
  return Json(out + text->substr(at));
}

void addStrings(FunctionTable& t) {
  auto oneString = [](const char* name, std::function<std::string(const std::string&)> apply) {
    return FunctionSpec{1, 1, [name, apply = std::move(apply)](const Args& a) {
                          return stringFunction(name, a, 0, [&](const std::string& s) { return Json(apply(s)); });
                        }};
  };
  t["upper"] = oneString("upper", [](const std::string& s) { return toUpperAscii(s); });
  t["lower"] = oneString("lower", [](const std::string& s) { return toLowerAscii(s); });
  t["trim"] = oneString("trim", [](const std::string& s) { return trimSpace(s); });
  t["b64enc"] = oneString("b64enc", [](const std::string& s) { return base64Encode(s); });
  t["trimPrefix"] = {2, 2, twoStrings("trimPrefix", "the prefix", "the string", [](const auto& prefix, const auto& s) {
                       return Json(startsWith(s, prefix) ? s.substr(prefix.size()) : s);
                     })};
  t["trimSuffix"] = {2, 2, twoStrings("trimSuffix", "the suffix", "the string", [](const auto& suffix, const auto& s) {
                       return Json(hasSuffixText(s, suffix) ? s.substr(0, s.size() - suffix.size()) : s);
                     })};
  t["contains"] = {2, 2, twoStrings("contains", "the substring", "the string", [](const auto& part, const auto& s) {
                     return Json(s.find(part) != std::string::npos);
                   })};
  t["hasPrefix"] = {2, 2, twoStrings("hasPrefix", "the prefix", "the string", [](const auto& prefix, const auto& s) {
                      return Json(startsWith(s, prefix));
                    })};
  t["hasSuffix"] = {2, 2, twoStrings("hasSuffix", "the suffix", "the string", [](const auto& suffix, const auto& s) {
                      return Json(hasSuffixText(s, suffix));
                    })};
  t["replace"] = {3, 3, replaceAll};
  t["b64dec"] = {1, 1, [](const Args& a) -> Result<Json> {
                   auto text = needString("b64dec", a[0], "the argument");
                   FLOTILLA_TRY(text);
                   auto decoded = base64Decode(*text);
                   if (!decoded.ok()) {
                     return fail(argError("b64dec", "not base64: " + decoded.error().message));
                   }
                   return Json(*decoded);
                 }};
}

thread_local size_t t_max_value_bytes = Limits{}.max_output_bytes;

}  // namespace

size_t maxValueBytes() {
  return t_max_value_bytes;
}

ValueLimitScope::ValueLimitScope(size_t max_bytes) : previous_(t_max_value_bytes) {
  t_max_value_bytes = max_bytes;
}

ValueLimitScope::~ValueLimitScope() {
  t_max_value_bytes = previous_;
}

Error valueTooLarge(const std::string& function) {
  return argError(function,
                  "the result exceeds the template output limit of " + std::to_string(maxValueBytes()) + " bytes");
}

const FunctionTable& functions() {
  static const FunctionTable table = [] {
    FunctionTable t;
    addBuiltins(t);
    addFormatting(t);
    addSprigLogic(t);
    addStrings(t);
    return t;
  }();
  return table;
}

}  // namespace flotilla::templating::detail

#include "decoder.h"

#include <algorithm>
#include <cctype>

#include "flotilla/core/util.h"

namespace flotilla::model::detail {
namespace {

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) {
    row[j] = j;
  }
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      bool same =
          std::tolower(static_cast<unsigned char>(a[i - 1])) == std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string typeName(const Json& value) {
  switch (value.type()) {
    case Json::Type::kNull:
      return "null";
    case Json::Type::kBool:
      return "a boolean";
    case Json::Type::kInt:
      return "a number";
    case Json::Type::kDouble:
      return "a decimal number";
    case Json::Type::kString:
      return "a string";
    case Json::Type::kArray:
      return "a list";
    case Json::Type::kObject:
      return "a map";
  }
  return "a value";
}

std::string DecodeContext::locate(std::string_view path) const {
  std::string out = source_;
  if (document_ != nullptr) {
    out += (out.empty() ? "line " : ":") + std::to_string(document_->lineOf(path));
  }
  return out;
}

void DecodeContext::fail(std::string_view path, std::string message) {
  if (problems_.size() >= kMaxErrors) {
    ++dropped_;
    return;
  }
  std::string where = locate(path);
  if (problems_.empty()) {
    first_where_ = where;
  }
  std::string prefix = where.empty() ? "" : where + ": ";
  problems_.emplace_back(prefix + (path.empty() ? std::string("(document)") : std::string(path)), std::move(message));
}

Error DecodeContext::error() const {
  std::string message;
  for (const auto& [at, what] : problems_) {
    if (!message.empty()) {
      message += "; ";
    }
    message.append(at).append(": ").append(what);
  }
  if (dropped_ > 0) {
    message += "; and " + std::to_string(dropped_) + " more";
  }
  return makeError(ErrorKind::kInvalid, std::move(message), first_where_);
}

Fields::Fields(DecodeContext& ctx, const Json& value, std::string path) : ctx_(ctx), path_(std::move(path)) {
  if (value.isObject()) {
    object_ = &value;
  } else if (value.isNull()) {
    static const Json kEmpty = Json::object();
    object_ = &kEmpty;
  } else {
    ctx_.fail(path_, "expected a map, got " + typeName(value));
  }
}

const Json* Fields::take(std::string_view key) {
  known_.emplace(key);
  if (object_ == nullptr) {
    return nullptr;
  }
  const Json* value = object_->find(key);
  return value == nullptr || value->isNull() ? nullptr : value;
}

void Fields::require(std::string_view key) {
  if (object_ != nullptr && take(key) == nullptr) {
    ctx_.fail(pathOf(key), "required field is missing");
  }
}

void Fields::str(std::string_view key, std::string& out) {
  const Json* value = take(key);
  if (value == nullptr) {
    return;
  }
  if (!value->isString()) {
    ctx_.fail(pathOf(key), "expected a string, got " + typeName(*value));
    return;
  }
  out = value->asString();
}

void Fields::boolean(std::string_view key, bool& out) {
  std::optional<bool> value;
  optBoolean(key, value);
  if (value) {
    out = *value;
  }
}

void Fields::optBoolean(std::string_view key, std::optional<bool>& out) {
  const Json* value = take(key);
  if (value == nullptr) {
    return;
  }
  if (!value->isBool()) {
    ctx_.fail(pathOf(key), "expected true or false, got " + typeName(*value));
    return;
  }
  out = value->asBool();
}

void Fields::integer(std::string_view key, int64_t& out, int64_t min) {
  std::optional<int64_t> value;
  optInteger(key, value, min);
  if (value) {
    out = *value;
  }
}

void Fields::optInteger(std::string_view key, std::optional<int64_t>& out, int64_t min) {
  const Json* value = take(key);
  if (value == nullptr) {
    return;
  }
  if (!value->isInt()) {
    ctx_.fail(pathOf(key), "expected an integer, got " + typeName(*value));
    return;
  }
  if (value->asInt() < min) {
    ctx_.fail(pathOf(key), "must be at least " + std::to_string(min) + ", got " + std::to_string(value->asInt()));
    return;
  }
  out = value->asInt();
}

void Fields::strings(std::string_view key, std::vector<std::string>& out) {
  const Json* value = take(key);
  if (value == nullptr) {
    return;
  }
  if (!value->isArray()) {
    ctx_.fail(pathOf(key), "expected a list of strings, got " + typeName(*value));
    return;
  }
  std::vector<std::string> decoded;
  for (size_t i = 0; i < value->asArray().size(); ++i) {
    const Json& item = value->asArray()[i];
    if (!item.isString()) {
      ctx_.fail(yamlIndexPath(pathOf(key), i), "expected a string, got " + typeName(item));
      continue;
    }
    decoded.push_back(item.asString());
  }
  out = std::move(decoded);
}

void Fields::stringMap(std::string_view key, Labels& out) {
  std::optional<Labels> value;
  optStringMap(key, value);
  if (value) {
    out = std::move(*value);
  }
}

void Fields::optStringMap(std::string_view key, std::optional<Labels>& out) {
  const Json* value = take(key);
  if (value == nullptr) {
    return;
  }
  if (!value->isObject()) {
    ctx_.fail(pathOf(key), "expected a map of strings, got " + typeName(*value));
    return;
  }
  Labels decoded;
  for (const auto& [k, v] : value->asObject()) {
    if (!v.isString()) {
      ctx_.fail(yamlKeyPath(pathOf(key), k),
                "expected a string, got " + typeName(v) + (v.isNull() ? "" : " (quote it: \"...\")"));
      continue;
    }
    decoded.emplace(k, v.asString());
  }
  out = std::move(decoded);
}

void Fields::labels(std::string_view key, Labels& out) {
  Labels decoded;
  stringMap(key, decoded);
  for (const auto& [k, v] : decoded) {
    if (auto s = validateLabelKey(k); !s.ok()) {
      ctx_.fail(yamlKeyPath(pathOf(key), k), s.error().message);
    } else if (auto sv = validateLabelValue(v); !sv.ok()) {
      ctx_.fail(yamlKeyPath(pathOf(key), k), sv.error().message);
    }
  }
  out = std::move(decoded);
}

void Fields::map(std::string_view key, std::optional<Json>& out) {
  const Json* value = take(key);
  if (value == nullptr) {
    return;
  }
  if (!value->isObject()) {
    ctx_.fail(pathOf(key), "expected a map, got " + typeName(*value));
    return;
  }
  out = *value;
}

void Fields::list(std::string_view key, std::optional<Json>& out) {
  const Json* value = take(key);
  if (value == nullptr) {
    return;
  }
  if (!value->isArray()) {
    ctx_.fail(pathOf(key), "expected a list, got " + typeName(*value));
    return;
  }
  out = *value;
}

void Fields::duration(std::string_view key, std::optional<Duration>& out) {
  const Json* value = take(key);
  if (value == nullptr) {
    return;
  }
  if (!value->isString()) {
    ctx_.fail(pathOf(key), "expected a duration string like \"15s\", got " + typeName(*value));
    return;
  }
  auto parsed = parseDuration(value->asString());
  if (!parsed.ok()) {
    ctx_.fail(pathOf(key), parsed.error().message);
    return;
  }
  out = *parsed;
}

void Fields::intOrPercent(std::string_view key, std::optional<IntOrPercent>& out) {
  const Json* value = take(key);
  if (value == nullptr) {
    return;
  }
  std::string expected = "expected a count (10) or a percentage (\"10%\")";
  if (value->isInt()) {
    if (value->asInt() < 0) {
      ctx_.fail(pathOf(key), "must not be negative");
      return;
    }
    out = IntOrPercent{value->asInt(), false};
    return;
  }
  if (!value->isString()) {
    ctx_.fail(pathOf(key), expected + ", got " + typeName(*value));
    return;
  }
  const std::string& text = value->asString();
  bool digits = text.size() >= 2 && text.back() == '%' &&
                std::all_of(text.begin(), text.end() - 1, [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || text.size() > 6) {
    ctx_.fail(pathOf(key), expected + ", got \"" + text + "\"");
    return;
  }
  int64_t percent = std::stoll(text.substr(0, text.size() - 1));
  if (percent > 100) {
    ctx_.fail(pathOf(key), "a percentage must be at most 100%, got \"" + text + "\"");
    return;
  }
  out = IntOrPercent{percent, true};
}

void decodeSelectorInto(Fields& in, LabelSelector& out) {
  in.stringMap("matchLabels", out.match_labels);
  in.objects("matchExpressions", out.match_expressions, [](Fields& f, SelectorRequirement& req) {
    f.require("key");
    f.str("key", req.key);
    f.require("operator");
    std::string op;
    f.str("operator", op);
    if (!op.empty()) {
      auto parsed = parseOperator(op);
      if (!parsed.ok()) {
        f.ctx().fail(f.pathOf("operator"), parsed.error().message);
      } else {
        req.op = *parsed;
      }
    }
    f.strings("values", req.values);
  });
}

void Fields::selector(std::string_view key, std::optional<LabelSelector>& out) {
  std::optional<LabelSelector> decoded;
  object(key, decoded, decodeSelectorInto);
  if (!decoded) {
    return;
  }
  if (auto s = validateSelector(*decoded, pathOf(key)); !s.ok()) {
    // validateSelector's message starts with the offending field's path; keep that path for the line lookup.
    const std::string& message = s.error().message;
    size_t colon = message.find(": ");
    ctx_.fail(message.substr(0, colon), colon == std::string::npos ? message : message.substr(colon + 2));
    return;
  }
  out = std::move(decoded);
}

void Fields::finish() {
  if (object_ == nullptr) {
    return;
  }
  for (const auto& [key, value] : object_->asObject()) {
    if (known_.contains(key)) {
      continue;
    }
    std::string message = "unknown field";
    std::string best;
    size_t best_distance = 3;
    for (const auto& candidate : known_) {
      size_t d = editDistance(key, candidate);
      if (d < best_distance) {
        best_distance = d;
        best = candidate;
      }
    }
    if (!best.empty()) {
      message += " (did you mean \"" + best + "\"?)";
    }
    ctx_.fail(pathOf(key), std::move(message));
  }
}

void Out::strings(std::string_view key, const std::vector<std::string>& values) {
  if (values.empty()) {
    return;
  }
  Json list = Json::array();
  for (const auto& value : values) {
    list.push(value);
  }
  json_[key] = std::move(list);
}

Json Out::stringMapJson(const Labels& values) {
  Json map = Json::object();
  for (const auto& [k, v] : values) {
    map[k] = v;
  }
  return map;
}

void Out::stringMap(std::string_view key, const Labels& values) {
  if (!values.empty()) {
    json_[key] = stringMapJson(values);
  }
}

void Out::intOrPercent(std::string_view key, const std::optional<IntOrPercent>& value) {
  if (!value) {
    return;
  }
  json_[key] = value->percent ? Json(value->toString()) : Json(value->value);
}

void Out::selector(std::string_view key, const std::optional<LabelSelector>& value) {
  if (value) {
    json_[key] = encodeSelector(*value);
  }
}

void Out::inlineAll(const Json& other) {
  for (const auto& [k, v] : other.asObject()) {
    json_[k] = v;
  }
}

}  // namespace flotilla::model::detail

#include <algorithm>

#include "option_fields.h"

namespace flotilla::model {
namespace detail {
namespace {

// Records a nested check's error, whose message starts with the field path, at that path (for the line lookup).
void failAtPath(Reader& in, const std::string& message) {
  size_t colon = message.find(": ");
  if (colon == std::string::npos) {
    in.fail({}, message);
  } else {
    in.fail(message.substr(0, colon), message.substr(colon + 2));
  }
}

}  // namespace

bool DurationCodec::read(Reader& in, std::string_view key, const Json& value, Duration& out) const {
  return readParsed(in, key, value, "a duration string like \"15s\"", parseDuration, out);
}

bool IntOrPercentCodec::read(Reader& in, std::string_view key, const Json& value, IntOrPercent& out) const {
  std::string expected = "expected a count (10) or a percentage (\"10%\")";
  if (value.isInt()) {
    if (value.asInt() < 0) {
      in.fail(in.pathOf(key), "must not be negative");
      return false;
    }
    out = IntOrPercent{value.asInt(), false};
    return true;
  }
  if (!value.isString()) {
    in.fail(in.pathOf(key), expected + ", got " + codec::typeName(value));
    return false;
  }
  const std::string& text = value.asString();
  bool digits = text.size() >= 2 && text.back() == '%' &&
                std::all_of(text.begin(), text.end() - 1, [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || text.size() > 6) {
    in.fail(in.pathOf(key), expected + ", got \"" + text + "\"");
    return false;
  }
  int64_t percent = std::stoll(text.substr(0, text.size() - 1));
  if (percent > 100) {
    in.fail(in.pathOf(key), "a percentage must be at most 100%, got \"" + text + "\"");
    return false;
  }
  out = IntOrPercent{percent, true};
  return true;
}

Json IntOrPercentCodec::write(const IntOrPercent& value) const {
  return value.percent ? Json(value.toString()) : Json(value.value);
}

bool SelectorCodec::read(Reader& in, std::string_view key, const Json& value, LabelSelector& out) const {
  Reader sub(in.problems(), value, in.pathOf(key));
  if (!sub.ok()) {
    return false;
  }
  LabelSelector decoded;
  fields(sub, decoded);
  sub.finish();
  if (auto s = validateSelector(decoded, in.pathOf(key)); !s.ok()) {
    failAtPath(in, s.error().message);
    return false;
  }
  out = std::move(decoded);
  return true;
}

void labels(Reader& in, std::string_view key, Labels& out) {
  Labels decoded;
  in.stringMap(key, decoded);
  for (const auto& [k, v] : decoded) {
    if (auto s = validateLabelKey(k); !s.ok()) {
      in.fail(yamlKeyPath(in.pathOf(key), k), s.error().message);
    } else if (auto sv = validateLabelValue(v); !sv.ok()) {
      in.fail(yamlKeyPath(in.pathOf(key), k), sv.error().message);
    }
  }
  out = std::move(decoded);
}

}  // namespace detail

Json encodeSelector(const LabelSelector& selector) {
  return codec::encode(selector, detail::kFields);
}

}  // namespace flotilla::model

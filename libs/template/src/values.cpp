// Go's value rules: truth, default formatting, quoting and comparison.
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "template_internal.h"

namespace flotilla::templating::detail {
namespace {

//! Go's %v for a float64: the shortest representation that reads back exactly (%g style, "3e+06").
std::string formatDouble(double value) {
  char buffer[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) {
      break;
    }
  }
  return buffer;
}

}  // namespace

Error syntaxError(size_t column, const std::string& message) {
  return Error{ErrorKind::kInvalid, "column " + std::to_string(column + 1) + ": " + message, {}};
}

bool truthy(const Json& value) {
  switch (value.type()) {
    case Json::Type::kNull:
      return false;
    case Json::Type::kBool:
      return value.asBool();
    case Json::Type::kInt:
      return value.asInt() != 0;
    case Json::Type::kDouble:
      return value.asDouble() != 0;
    case Json::Type::kString:
      return !value.asString().empty();
    case Json::Type::kArray:
      return !value.asArray().empty();
    case Json::Type::kObject:
      return !value.asObject().empty();
  }
  return false;
}

//! Go's default formatting (%v) of a value.
std::string print(const Json& value) {
  switch (value.type()) {
    case Json::Type::kNull:
      return "<no value>";
    case Json::Type::kBool:
      return value.asBool() ? "true" : "false";
    case Json::Type::kInt:
      return std::to_string(value.asInt());
    case Json::Type::kDouble:
      return formatDouble(value.asDouble());
    case Json::Type::kString:
      return value.asString();
    case Json::Type::kArray: {
      std::string out = "[";
      for (size_t i = 0; i < value.asArray().size(); ++i) {
        out += (i > 0 ? " " : "") + print(value.asArray()[i]);
      }
      return out + "]";
    }
    case Json::Type::kObject: {
      std::string out = "map[";
      bool first = true;
      for (const auto& [k, v] : value.asObject()) {
        out += (first ? "" : " ") + k + ":" + print(v);
        first = false;
      }
      return out + "]";
    }
  }
  return {};
}

Error argError(const std::string& function, const std::string& message) {
  return Error{ErrorKind::kInvalid, "error calling " + function + ": " + message, {}};
}

Result<std::string> needString(const std::string& function, const Json& value, const char* what) {
  if (value.isString()) {
    return value.asString();
  }
  if (value.isNumber() || value.isBool()) {
    return print(value);  // sprig converts with toString
  }
  return fail(argError(function, std::string(what) + " must be a string, got " + jsonTypeName(value)));
}

std::string trimSpace(std::string_view text) {
  size_t b = 0;
  size_t e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b])) != 0) {
    ++b;
  }
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1])) != 0) {
    --e;
  }
  return std::string(text.substr(b, e - b));
}

std::string goQuote(std::string_view text) {
  // Go's strconv.Quote for printable text equals a JSON string literal except for <, >, & which Go keeps.
  return jsonQuote(text);
}

Result<int> compare(const std::string& function, const Json& a, const Json& b, bool ordering) {
  if (a.isNumber() && b.isNumber()) {
    double x = a.asDouble();
    double y = b.asDouble();
    if (a.isInt() && b.isInt()) {
      return a.asInt() < b.asInt() ? -1 : (a.asInt() > b.asInt() ? 1 : 0);
    }
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.isString() && b.isString()) {
    return a.asString().compare(b.asString()) < 0 ? -1 : (a.asString() == b.asString() ? 0 : 1);
  }
  if (!ordering && a.isBool() && b.isBool()) {
    return a.asBool() == b.asBool() ? 0 : 1;
  }
  if (!ordering && (a.isNull() || b.isNull())) {
    return a.isNull() && b.isNull() ? 0 : 1;
  }
  return fail(argError(function, "incompatible types for comparison: " + jsonTypeName(a) + " and " + jsonTypeName(b)));
}

}  // namespace flotilla::templating::detail

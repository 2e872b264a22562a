// Go's fmt.Sprintf for the verbs templates use: %s %v %q %d %f %e %g %x %X %t %%.
#include <cctype>
#include <cstdio>

#include "flotilla/core/ascii.h"
#include "template_internal.h"

namespace flotilla::templating::detail {
namespace {

//! One conversion: "%" plus flags, width and precision (passed to snprintf for numbers) and the verb letter.
struct Conversion {
  std::string spec = "%";
  char verb = 0;  //!< 0: the format ended before a verb
};

//! Reads flags, width, precision and the verb starting at f[i] (just after the '%'); `i` ends on the verb.
Conversion readConversion(const std::string& f, size_t& i) {
  Conversion conversion;
  while (i < f.size() && std::string_view("+-# 0").find(f[i]) != std::string_view::npos) {
    conversion.spec += f[i++];
  }
  while (i < f.size() && (std::isdigit(static_cast<unsigned char>(f[i])) != 0 || f[i] == '.')) {
    conversion.spec += f[i++];
  }
  if (i < f.size()) {
    conversion.verb = f[i];
  }
  return conversion;
}

//! Go's report of an argument that does not fit the verb: "%!d(string=abc)".
std::string wrongType(char verb, const Json& arg) {
  return std::string("%!") + verb + "(" + jsonTypeName(arg) + "=" + print(arg) + ")";
}

// The conversion specs passed to snprintf below are assembled only from the flag, width and precision characters
// readConversion accepts plus a fixed conversion letter matched to the argument's type, so a non-literal format
// is safe.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"

std::string formatText(const Conversion& c, const Json& arg) {
  if (c.verb == 's' && !(arg.isString() || arg.isNumber() || arg.isBool())) {
    return print(arg);
  }
  if (c.spec.size() == 1) {
    return print(arg);
  }
  char buffer[128];
  std::snprintf(buffer, sizeof(buffer), (c.spec + "s").c_str(), print(arg).c_str());
  return buffer;
}

std::string formatInteger(const Conversion& c, const Json& arg) {
  if (!arg.isNumber()) {
    return wrongType(c.verb, arg);
  }
  char buffer[128];
  std::snprintf(buffer, sizeof(buffer), (c.spec + "lld").c_str(), static_cast<long long>(arg.asInt()));
  return buffer;
}

std::string formatFloat(const Conversion& c, const Json& arg) {
  if (!arg.isNumber()) {
    return wrongType(c.verb, arg);
  }
  char buffer[128];
  std::snprintf(buffer, sizeof(buffer), (c.spec + c.verb).c_str(), arg.asDouble());
  return buffer;
}

//! %x/%X: an integer in hex, anything else as the hex of its printed bytes (Go's %x of a string).
std::string formatHex(const Conversion& c, const Json& arg) {
  if (arg.isInt()) {
    char buffer[128];
    std::snprintf(buffer, sizeof(buffer), (c.spec + "ll" + c.verb).c_str(), static_cast<long long>(arg.asInt()));
    return buffer;
  }
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char byte : print(arg)) {
    out += kHex[byte >> 4];
    out += kHex[byte & 15];
  }
  return c.verb == 'X' ? toUpperAscii(out) : out;
}

#pragma GCC diagnostic pop

Result<std::string> formatArgument(const Conversion& c, const Json& arg) {
  switch (c.verb) {
    case 'v':
    case 's':
      return formatText(c, arg);
    case 'q':
      return arg.isString() ? goQuote(arg.asString()) : print(arg);
    case 'd':
      return formatInteger(c, arg);
    case 'f':
    case 'e':
    case 'g':
      return formatFloat(c, arg);
    case 'x':
    case 'X':
      return formatHex(c, arg);
    case 't':
      return arg.isBool() ? print(arg) : wrongType(c.verb, arg);
    default:
      return fail(argError(
          "printf", std::string("unsupported verb %") + c.verb + " (supported: %s %v %q %d %f %e %g %x %X %t %%)"));
  }
}

}  // namespace

Result<std::string> sprintf(const Args& args) {
  if (args.empty()) {
    return fail(argError("printf", "missing format"));
  }
  auto format = needString("printf", args[0], "the format");
  FLOTILLA_TRY(format);
  const std::string& f = *format;
  std::string out;
  size_t next = 1;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    ++i;
    const Conversion conversion = readConversion(f, i);
    if (conversion.verb == 0) {
      out += "%!(NOVERB)";
      break;
    }
    if (conversion.verb == '%') {
      out += '%';
    } else if (next >= args.size()) {
      out += std::string("%!") + conversion.verb + "(MISSING)";
    } else {
      auto piece = formatArgument(conversion, args[next++]);
      FLOTILLA_TRY(piece);
      out += *piece;
    }
  }
  if (next < args.size()) {
    out += "%!(EXTRA)";
  }
  return out;
}

}  // namespace flotilla::templating::detail

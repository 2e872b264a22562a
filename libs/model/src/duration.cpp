#include "flotilla/model/duration.h"

#include <cmath>
#include <cstdint>
#include <limits>

namespace flotilla::model {
namespace {

struct Unit {
  std::string_view name;
  int64_t nanos;
};

// Longest names first so "ms" is not read as "m" followed by garbage.
constexpr Unit kUnits[] = {
    {"ns", 1},
    {"us", 1'000},
    {"\xC2\xB5s", 1'000},  // U+00B5 micro sign
    {"\xCE\xBCs", 1'000},  // U+03BC Greek mu
    {"ms", 1'000'000},
    {"s", 1'000'000'000},
    {"m", 60'000'000'000},
    {"h", 3'600'000'000'000},
};

Failure invalid(std::string_view text, const std::string& why) {
  return fail(ErrorKind::kInvalid, "invalid duration \"" + std::string(text) + "\": " + why);
}

}  // namespace

Result<Duration> parseDuration(std::string_view text) {
  std::string_view rest = text;
  if (!rest.empty() && rest.front() == '+') {
    rest.remove_prefix(1);
  } else if (!rest.empty() && rest.front() == '-') {
    return invalid(text, "must not be negative");
  }
  if (rest == "0") {
    return Duration{0};
  }
  if (rest.empty()) {
    return invalid(text, "expected a number and a unit such as \"15s\"");
  }
  long double total_nanos = 0;
  while (!rest.empty()) {
    size_t digits_end = 0;
    bool seen_digit = false;
    bool seen_dot = false;
    while (digits_end < rest.size()) {
      char c = rest[digits_end];
      if (c >= '0' && c <= '9') {
        seen_digit = true;
      } else if (c == '.' && !seen_dot) {
        seen_dot = true;
      } else {
        break;
      }
      ++digits_end;
    }
    if (!seen_digit) {
      return invalid(text, "expected a number before \"" + std::string(rest) + "\"");
    }
    long double number = std::strtold(std::string(rest.substr(0, digits_end)).c_str(), nullptr);
    rest.remove_prefix(digits_end);
    const Unit* unit = nullptr;
    for (const Unit& candidate : kUnits) {
      if (rest.substr(0, candidate.name.size()) == candidate.name &&
          (unit == nullptr || candidate.name.size() > unit->name.size())) {
        unit = &candidate;
      }
    }
    if (unit == nullptr) {
      size_t end = 0;
      while (end < rest.size() && !(rest[end] >= '0' && rest[end] <= '9') && rest[end] != '.') {
        ++end;
      }
      return invalid(text, rest.empty() ? std::string("missing unit (ns, us, ms, s, m, h)")
                                        : "unknown unit \"" + std::string(rest.substr(0, end)) + "\"");
    }
    rest.remove_prefix(unit->name.size());
    total_nanos += number * static_cast<long double>(unit->nanos);
    if (total_nanos > static_cast<long double>(std::numeric_limits<int64_t>::max())) {
      return invalid(text, "too large");
    }
  }
  return Duration{static_cast<int64_t>(total_nanos / 1'000'000.0L)};
}

std::string formatDuration(Duration duration) {
  int64_t ms = duration.count();
  if (ms == 0) {
    return "0s";
  }
  std::string sign;
  if (ms < 0) {
    sign = "-";
    ms = -ms;
  }
  if (ms < 1000) {
    return sign + std::to_string(ms) + "ms";
  }
  int64_t hours = ms / 3'600'000;
  int64_t minutes = (ms / 60'000) % 60;
  int64_t seconds = (ms / 1000) % 60;
  int64_t millis = ms % 1000;
  std::string out = sign;
  if (hours > 0) {
    out += std::to_string(hours) + "h";
  }
  if (hours > 0 || minutes > 0) {
    out += std::to_string(minutes) + "m";
  }
  out += std::to_string(seconds);
  if (millis > 0) {
    std::string frac = std::to_string(millis + 1000).substr(1);  // zero-padded to 3 digits
    while (frac.back() == '0') {
      frac.pop_back();
    }
    out += "." + frac;
  }
  out += "s";
  return out;
}

}  // namespace flotilla::model

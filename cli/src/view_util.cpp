#include "view_util.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>

namespace flotilla::cli::detail {

const Json& orEmpty(const Json* value) {
  static const Json kEmpty = Json::object();
  return value != nullptr ? *value : kEmpty;
}

std::string shortId(std::string_view id, size_t n) {
  auto colon = id.find(':');
  if (colon == std::string_view::npos) {
    return std::string(id.substr(0, n));
  }
  return std::string(id.substr(0, std::min(colon, n))) + ":" + std::string(id.substr(colon + 1, 8));
}

std::string truncate(std::string text, size_t n) {
  for (char& c : text) {
    if (c == '\n' || c == '\t') {
      c = ' ';
    }
  }
  if (text.size() > n) {
    text = text.substr(0, n - 3) + "...";
  }
  return text;
}

std::string joinMessages(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& part : parts) {
    if (part.empty()) {
      continue;
    }
    out += (out.empty() ? "" : "; ") + part;
  }
  return out;
}

std::string labelsText(const Json* labels) {
  if (labels == nullptr || !labels->isObject()) {
    return "<none>";
  }
  std::string out;
  for (const auto& [key, value] : labels->asObject()) {
    out += (out.empty() ? "" : ",") + key + "=" + (value.isString() ? value.asString() : value.dump());
  }
  return out.empty() ? "<none>" : out;
}

std::string orDash(const std::string& text) {
  return text.empty() ? "-" : text;
}

std::optional<std::chrono::system_clock::time_point> parseTime(std::string_view text) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  std::string s(text);
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d", &year, &month, &day, &hour, &minute, &second) != 6) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  auto at = std::chrono::system_clock::from_time_t(timegm(&tm));
  // Offset "+hh:mm" / "-hh:mm" after the seconds (and fraction); "Z" is UTC.
  size_t pos = 19;
  while (pos < s.size() && (s[pos] == '.' || std::isdigit(static_cast<unsigned char>(s[pos])))) {
    ++pos;
  }
  if (pos + 6 <= s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int oh = 0, om = 0;
    if (std::sscanf(s.c_str() + pos + 1, "%2d:%2d", &oh, &om) == 2) {
      auto offset = std::chrono::hours(oh) + std::chrono::minutes(om);
      at = s[pos] == '+' ? at - offset : at + offset;
    }
  }
  return at;
}

std::string newest(std::initializer_list<std::string> times) {
  std::string best;
  std::optional<std::chrono::system_clock::time_point> best_at;
  for (const auto& t : times) {
    auto at = parseTime(t);
    if (at && (!best_at || *at > *best_at)) {
      best = t;
      best_at = at;
    }
  }
  return best;
}

std::string workspaceOf(const Json& view) {
  const Json* ns = view.at({"metadata", "namespace"});
  return ns != nullptr && ns->isString() ? ns->asString() : std::string();
}

std::string nameOf(const Json& view) {
  const Json* name = view.at({"metadata", "name"});
  return name != nullptr && name->isString() ? name->asString() : std::string();
}

const Json& statusOf(const Json& view) {
  return orEmpty(view.find("status"));
}

const Json& displayOf(const Json& view) {
  return orEmpty(statusOf(view).find("display"));
}

std::string statusText(const Json& display) {
  std::string state = display.getString("state");
  std::string message = display.getString("message");
  if (state.empty()) {
    state = "-";
  }
  return truncate(message.empty() ? state : state + ": " + message, 100);
}

std::string Table::str() const {
  std::vector<size_t> widths;
  for (const auto& row : rows_) {
    widths.resize(std::max(widths.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::string out;
  for (const auto& row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) {
        line += std::string(widths[i] - row[i].size() + 3, ' ');
      }
    }
    while (!line.empty() && line.back() == ' ') {
      line.pop_back();
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace flotilla::cli::detail

#include "view_util.h"

#include <algorithm>

#include "flotilla/core/time.h"

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

std::string newest(std::initializer_list<std::string> times) {
  std::string best;
  std::optional<std::chrono::system_clock::time_point> best_at;
  for (const auto& t : times) {
    auto at = parseRfc3339(t);
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

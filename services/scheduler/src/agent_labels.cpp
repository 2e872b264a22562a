#include "flotilla/scheduler/agent_labels.h"

#include <algorithm>

#include "flotilla/core/util.h"

namespace flotilla::scheduler {

AgentLabelPolicy AgentLabelPolicy::all() {
  AgentLabelPolicy policy;
  policy.prefixes_.emplace_back();
  return policy;
}

Result<AgentLabelPolicy> AgentLabelPolicy::parse(std::string_view list) {
  AgentLabelPolicy policy;
  if (list.empty() || list == "none") {
    return policy;
  }
  for (const std::string& entry : split(list, ',')) {
    std::string_view item = entry;
    if (item.empty()) {
      return fail(ErrorKind::kInvalid, "--agent-labels: an empty entry in \"" + std::string(list) + "\"");
    }
    if (item.back() == '*') {
      std::string_view prefix = item.substr(0, item.size() - 1);
      if (prefix.find('*') != std::string_view::npos) {
        return fail(ErrorKind::kInvalid, "--agent-labels: \"" + entry + "\": '*' may only end an entry (a key prefix)");
      }
      policy.prefixes_.emplace_back(prefix);
      continue;
    }
    if (auto valid = model::validateLabelKey(item); !valid.ok()) {
      return fail(ErrorKind::kInvalid,
                  "--agent-labels: \"" + entry + "\" is not a label key: " + valid.error().message);
    }
    policy.keys_.emplace_back(item);
  }
  return policy;
}

bool AgentLabelPolicy::allows(std::string_view key) const {
  return std::find(keys_.begin(), keys_.end(), key) != keys_.end() ||
         std::any_of(prefixes_.begin(), prefixes_.end(),
                     [&](const std::string& prefix) { return key.starts_with(prefix); });
}

model::Labels AgentLabelPolicy::filter(const model::Labels& reported, std::vector<std::string>& left_out) const {
  model::Labels allowed;
  for (const auto& [key, value] : reported) {
    if (allows(key)) {
      allowed.emplace(key, value);
    } else {
      left_out.push_back(key);
    }
  }
  return allowed;
}

std::string AgentLabelPolicy::describe() const {
  std::vector<std::string> entries = keys_;
  for (const std::string& prefix : prefixes_) {
    entries.push_back(prefix + "*");
  }
  return entries.empty() ? "none" : join(entries, ",");
}

}  // namespace flotilla::scheduler

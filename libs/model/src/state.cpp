#include "flotilla/model/state.h"

#include <algorithm>
#include <array>

namespace flotilla::model {
namespace {

struct StateField {
  BundleState state;
  std::string_view json_key;  // the BundleSummary counter's key
};

constexpr StateField kStateFields[] = {
    {BundleState::kReady, "ready"},           {BundleState::kNotReady, "notReady"},
    {BundleState::kPending, "pending"},       {BundleState::kOutOfSync, "outOfSync"},
    {BundleState::kModified, "modified"},     {BundleState::kWaitApplied, "waitApplied"},
    {BundleState::kErrApplied, "errApplied"},
};

// Worst state first, then by name: the order details are kept in, so a capped list shows the worst problems.
bool detailBefore(const NonReadyDetail& a, const NonReadyDetail& b) {
  if (a.state != b.state) {
    return stateRank(a.state) > stateRank(b.state);
  }
  return a.name < b.name;
}

void normalizeDetails(std::vector<NonReadyDetail>& details) {
  std::stable_sort(details.begin(), details.end(), detailBefore);
  if (details.size() > StateSummary::kMaxNonReadyDetails) {
    details.resize(StateSummary::kMaxNonReadyDetails);
  }
}

std::string join(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
}

}  // namespace

std::string_view stateName(BundleState state) {
  // Indexed by stateRank(state) - 1.
  static constexpr std::array<std::string_view, 7> kNames = {"Ready",    "NotReady",    "Pending",   "OutOfSync",
                                                             "Modified", "WaitApplied", "ErrApplied"};
  auto index = static_cast<size_t>(stateRank(state) - 1);
  return index < kNames.size() ? kNames[index] : "Unknown";
}

Result<BundleState> parseState(std::string_view name) {
  for (BundleState state : kAllStates) {
    if (stateName(state) == name) {
      return state;
    }
  }
  return fail(ErrorKind::kInvalid, "unknown bundle state \"" + std::string(name) +
                                       "\" (one of Ready, NotReady, Pending, OutOfSync, Modified, WaitApplied, "
                                       "ErrApplied)");
}

BundleState StateSummary::worst() const {
  for (BundleState state : kAllStates) {
    if (count(state) > 0) {
      return state;
    }
  }
  return BundleState::kReady;
}

void StateSummary::add(BundleState state, std::string name, std::string message) {
  ++counts[stateRank(state) - 1];
  ++desired_ready;
  if (state != BundleState::kReady && !name.empty()) {
    non_ready.push_back(NonReadyDetail{std::move(name), state, std::move(message)});
    normalizeDetails(non_ready);
  }
}

void StateSummary::merge(const StateSummary& other) {
  for (size_t i = 0; i < counts.size(); ++i) {
    counts[i] += other.counts[i];
  }
  desired_ready += other.desired_ready;
  non_ready.insert(non_ready.end(), other.non_ready.begin(), other.non_ready.end());
  normalizeDetails(non_ready);
}

std::string StateSummary::describe() const {
  std::string out;
  for (BundleState state : kAllStates) {
    if (state == BundleState::kReady || count(state) == 0) {
      continue;
    }
    if (!out.empty()) {
      out += ", ";
    }
    out += std::string(stateName(state)) + "(" + std::to_string(count(state)) + ")";
  }
  if (out.empty() && !isReady()) {
    out = "Ready(" + std::to_string(ready()) + "/" + std::to_string(desired_ready) + ")";
  }
  std::string details;
  for (const auto& detail : non_ready) {
    if (!details.empty()) {
      details += "; ";
    }
    details += detail.name;
    if (!detail.message.empty()) {
      details += ": " + detail.message;
    }
  }
  if (!details.empty()) {
    out += " [" + details + "]";
  }
  return out;
}

Json encodeStateSummary(const StateSummary& summary) {
  Json out = Json::object();
  for (const auto& field : kStateFields) {
    int64_t n = summary.count(field.state);
    if (n != 0 || field.state == BundleState::kReady) {
      out[field.json_key] = n;
    }
  }
  out["desiredReady"] = summary.desired_ready;
  if (!summary.non_ready.empty()) {
    Json list = Json::array();
    for (const auto& detail : summary.non_ready) {
      Json item = Json::obj({{"bundleState", std::string(stateName(detail.state))}});
      if (!detail.name.empty()) {
        item["name"] = detail.name;
      }
      if (!detail.message.empty()) {
        item["message"] = detail.message;
      }
      list.push(std::move(item));
    }
    out["nonReadyResources"] = std::move(list);
  }
  return out;
}

Result<StateSummary> decodeStateSummary(const Json& value, std::string_view path) {
  auto invalid = [&](std::string_view field, const std::string& message) {
    return fail(ErrorKind::kInvalid, join(path, field) + ": " + message);
  };
  StateSummary summary;
  if (value.isNull()) {
    return summary;
  }
  if (!value.isObject()) {
    return fail(ErrorKind::kInvalid, std::string(path) + ": expected a map, got " + jsonTypeName(value));
  }
  for (const auto& [key, item] : value.asObject()) {
    if (item.isNull()) {
      continue;
    }
    const StateField* counter = nullptr;
    for (const auto& field : kStateFields) {
      if (field.json_key == key) {
        counter = &field;
      }
    }
    if (counter != nullptr || key == "desiredReady") {
      if (!item.isInt() || item.asInt() < 0) {
        return invalid(key, "expected a non-negative integer, got " + jsonTypeName(item));
      }
      (counter != nullptr ? summary.counts[stateRank(counter->state) - 1] : summary.desired_ready) = item.asInt();
      continue;
    }
    if (key != "nonReadyResources") {
      return invalid(key, "unknown field");
    }
    if (!item.isArray()) {
      return invalid(key, "expected a list, got " + jsonTypeName(item));
    }
    for (size_t i = 0; i < item.asArray().size(); ++i) {
      const Json& entry = item.asArray()[i];
      std::string entry_path = "nonReadyResources[" + std::to_string(i) + "]";
      if (!entry.isObject()) {
        return invalid(entry_path, "expected a map, got " + jsonTypeName(entry));
      }
      NonReadyDetail detail;
      for (const auto& [field, field_value] : entry.asObject()) {
        if (field_value.isNull()) {
          continue;
        }
        std::string field_path = std::string(entry_path).append(".").append(field);
        if (field != "name" && field != "bundleState" && field != "message") {
          return invalid(field_path, "unknown field");
        }
        if (!field_value.isString()) {
          return invalid(field_path, "expected a string, got " + jsonTypeName(field_value));
        }
        if (field == "name") {
          detail.name = field_value.asString();
        } else if (field == "message") {
          detail.message = field_value.asString();
        } else {
          auto state = parseState(field_value.asString());
          if (!state.ok()) {
            return invalid(field_path, state.error().message);
          }
          detail.state = *state;
        }
      }
      summary.non_ready.push_back(std::move(detail));
    }
  }
  if (summary.non_ready.size() > StateSummary::kMaxNonReadyDetails) {
    return invalid("nonReadyResources",
                   "at most " + std::to_string(StateSummary::kMaxNonReadyDetails) + " entries are allowed");
  }
  return summary;
}

}  // namespace flotilla::model

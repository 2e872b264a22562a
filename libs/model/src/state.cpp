#include "flotilla/model/state.h"

#include <algorithm>
#include <array>

#include "decoder.h"

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

namespace {

// A BundleSummary counter.
struct CounterCodec {
  bool read(codec::Reader& in, std::string_view key, const Json& value, int64_t& out) const {
    if (!value.isInt() || value.asInt() < 0) {
      in.fail(in.pathOf(key), "expected a non-negative integer, got " + jsonTypeName(value));
      return false;
    }
    out = value.asInt();
    return true;
  }
  Json write(int64_t value) const { return value; }
};

struct StateCodec {
  bool read(codec::Reader& in, std::string_view key, const Json& value, BundleState& out) const {
    return detail::readParsed(in, key, value, "a string", parseState, out);
  }
  Json write(BundleState value) const { return std::string(stateName(value)); }
};

// Fleet writes ready, desiredReady and each detail's bundleState even when zero: the writer always keeps them,
// the reader does not require them.
template <typename V>
constexpr bool kAlwaysWritten = !codec::kDecoding<V>;

constexpr auto kDetailFields = [](auto& v, auto& s) {
  v.str("name", s.name);
  v.value("bundleState", s.state, StateCodec{}, kAlwaysWritten<decltype(v)>);
  v.str("message", s.message);
};

constexpr auto kSummaryFields = [](auto& v, auto& s) {
  for (const auto& field : kStateFields) {
    bool always = field.state == BundleState::kReady && kAlwaysWritten<decltype(v)>;
    v.value(field.json_key, s.counts[stateRank(field.state) - 1], CounterCodec{}, always);
  }
  v.value("desiredReady", s.desired_ready, CounterCodec{}, kAlwaysWritten<decltype(v)>);
  v.objects("nonReadyResources", s.non_ready, kDetailFields);
  v.validate([&](codec::Reader& in) {
    if (s.non_ready.size() > StateSummary::kMaxNonReadyDetails) {
      in.fail(in.pathOf("nonReadyResources"),
              "at most " + std::to_string(StateSummary::kMaxNonReadyDetails) + " entries are allowed");
    }
  });
};

}  // namespace

// A summary inside a resource's status: decoded in place, so its problems carry the document's lines.
bool detail::SummaryCodec::read(codec::Reader& in, std::string_view key, const Json& value, StateSummary& out) const {
  codec::Reader sub(in.problems(), value, in.pathOf(key));
  if (!sub.ok()) {
    return false;
  }
  StateSummary decoded;
  kSummaryFields(sub, decoded);
  sub.finish();
  out = std::move(decoded);
  return true;
}

Json encodeStateSummary(const StateSummary& summary) {
  return codec::encode(summary, kSummaryFields);
}

Result<StateSummary> decodeStateSummary(const Json& value, std::string_view path) {
  return codec::decode<StateSummary>(value, path, kSummaryFields);
}

}  // namespace flotilla::model

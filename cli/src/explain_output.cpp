// `flotilla explain`'s two outputs (explain.h): JSON within a byte budget (1 KB by default: what an automation
// agent reads in one call), and a few lines for a person.
#include <array>
#include <sstream>

#include "flotilla/cli/explain.h"
#include "flotilla/core/json.h"

namespace flotilla::cli {

namespace {

//! At most `limit` bytes of `text` (0 = unlimited), cut on a UTF-8 character boundary, "..." marking a cut.
std::string clip(const std::string& text, size_t limit) {
  if (limit == 0 || text.size() <= limit) {
    return text;
  }
  size_t end = limit > 3 ? limit - 3 : 0;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0U) == 0x80U) {
    --end;  // a continuation byte: back off to the start of its character
  }
  return text.substr(0, end) + "...";
}

//! How hard one attempt shortens: text limits (0 = unlimited) and how many clusters are named.
struct Budget {
  size_t detail = 0;
  size_t reason = 0;
  size_t next = 0;
  size_t clusters = 0;
  bool details = true;  //!< false: the stages' details are left out
};

Json toJson(const Explanation& e, const Budget& budget, size_t name_limit) {
  Json stages = Json::array();
  for (const auto& stage : e.stages) {
    Json item = Json::obj({{"stage", stage.stage}, {"state", stage.state}});
    if (budget.details) {
      item["detail"] = clip(stage.detail, budget.detail);
    }
    stages.push(std::move(item));
  }
  Json out = Json::obj({{"subject", clip(e.subject, name_limit)},
                        {"commit", e.commit},
                        {"ready", !e.blocked.has_value()},
                        {"stages", std::move(stages)},
                        {"next", clip(e.next, budget.next)}});
  if (e.blocked) {
    Json blocked = Json::obj({{"stage", e.blocked->stage},
                              {"reason", clip(e.blocked->reason, budget.reason)},
                              {"needsChange", e.blocked->needs_change}});
    const auto& clusters = e.blocked->clusters;
    if (!clusters.empty() && budget.clusters > 0) {
      Json names = Json::array();
      for (size_t i = 0; i < clusters.size() && i < budget.clusters; ++i) {
        names.push(clip(clusters[i], name_limit));
      }
      blocked["clusters"] = std::move(names);
    }
    if (!clusters.empty() && clusters.size() > budget.clusters) {
      blocked["clustersTotal"] = static_cast<int64_t>(clusters.size());
    }
    out["blocked"] = std::move(blocked);
  } else {
    out["blocked"] = nullptr;
  }
  return out;
}

}  // namespace

std::string explanationJson(const Explanation& explanation, size_t max_bytes) {
  // From everything to the bare minimum; the first that fits is printed.
  constexpr std::array<Budget, 7> kBudgets = {{{0, 0, 0, 50, true},
                                               {160, 300, 300, 10, true},
                                               {100, 200, 200, 5, true},
                                               {60, 140, 140, 3, true},
                                               {30, 100, 100, 2, true},
                                               {0, 80, 80, 1, false},
                                               {0, 40, 40, 0, false}}};
  for (const auto& budget : kBudgets) {
    std::string text = toJson(explanation, budget, 0).dump();
    if (text.size() <= max_bytes) {
      return text;
    }
  }
  std::string minimal = toJson(explanation, kBudgets.back(), 80).dump();
  return minimal.size() <= max_bytes ? minimal : std::string(R"({"truncated":true})");
}

std::string explanationText(const Explanation& e) {
  std::ostringstream out;
  out << e.subject << (e.commit.empty() ? "" : " at " + e.commit.substr(0, 12)) << ": "
      << (e.blocked ? "blocked at " + e.blocked->stage : std::string("Ready")) << "\n";
  for (const auto& stage : e.stages) {
    std::string name = stage.stage;
    std::string state = stage.state;
    name.resize(8, ' ');
    state.resize(9, ' ');
    out << "  " << name << state << clip(stage.detail, 100) << "\n";
  }
  if (e.blocked) {
    out << "why:  " << clip(e.blocked->reason, 300) << "\n";
    if (!e.blocked->clusters.empty()) {
      std::string names;
      for (size_t i = 0; i < e.blocked->clusters.size() && i < 10; ++i) {
        names += (i == 0 ? "" : ", ") + e.blocked->clusters[i];
      }
      const size_t more = e.blocked->clusters.size() > 10 ? e.blocked->clusters.size() - 10 : 0;
      out << "clusters: " << names << (more > 0 ? " and " + std::to_string(more) + " more" : "") << "\n";
    }
  }
  out << "next: " << clip(e.next, 300) << "\n";
  return out.str();
}

}  // namespace flotilla::cli

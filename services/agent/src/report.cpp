#include "flotilla/agent/report.h"

namespace flotilla::agent {
namespace {

events::ObjectResult objectResult(const ObjectRef& ref, model::BundleState state, const std::string& message) {
  return events::ObjectResult{.api_version = ref.api_version,
                              .kind = ref.kind,
                              .ns = ref.ns,
                              .name = ref.name,
                              .state = std::string(model::stateName(state)),
                              .message = truncateMessage(message)};
}

// "<intro>: A: x; B: y (and 3 more)"; without an intro "A: x; B: y (and 3 more)".
std::string listMessage(std::string intro, const std::vector<std::string>& items) {
  std::string text = std::move(intro);
  for (size_t i = 0; i < items.size() && i < kMaxMessageItems; ++i) {
    text += (i == 0 ? (text.empty() ? "" : ": ") : "; ") + items[i];
  }
  if (items.size() > kMaxMessageItems) {
    text += " (and " + std::to_string(items.size() - kMaxMessageItems) + " more)";
  }
  return text;
}

}  // namespace

std::string truncateMessage(std::string text, size_t limit) {
  if (text.size() <= limit) {
    return text;
  }
  size_t cut = limit;
  // Back up over UTF-8 continuation bytes (10xxxxxx) so the result stays valid UTF-8.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  text.resize(cut);
  return text + "...";
}

std::string conflictMessage(const ObjectRef& ref, std::string_view owner, std::string_view claimant) {
  std::string object = ref.kind + " " + (ref.ns.empty() ? ref.name : ref.ns + "/" + ref.name);
  std::string a(owner);
  std::string b(claimant);
  return object + " is owned by bundle " + a + " and also claimed by " + b + "; " + b + " takes it over when " + a +
         " releases it";
}

std::string unmanagedMessage(const ObjectRef& ref, const std::vector<std::string>& managers) {
  std::string object = ref.kind + " " + (ref.ns.empty() ? ref.name : ref.ns + "/" + ref.name);
  std::string who;
  for (const auto& manager : managers) {
    who += (who.empty() ? " (field managers: " : ", ") + manager;
  }
  return object + " exists and is not managed by Flotilla" + (who.empty() ? "" : who + ")") +
         "; set helm.takeOwnership to adopt it";
}

BundleReport summarize(const std::vector<ObjectOutcome>& outcomes) {
  BundleReport report;
  std::vector<std::string> failed;
  std::vector<std::string> not_ready;
  std::vector<std::string> replaced;
  bool only_conflicts = true;
  bool only_unmanaged = true;
  bool only_outside = true;
  for (const auto& outcome : outcomes) {
    if (outcome.apply_failed) {
      only_conflicts = only_conflicts && outcome.conflict;
      only_unmanaged = only_unmanaged && outcome.unmanaged;
      only_outside = only_outside && outcome.outside;
      failed.push_back(outcome.conflict || outcome.unmanaged || outcome.outside
                           ? outcome.error
                           : outcome.ref.describe() + ": " + truncateMessage(outcome.error));
      if (report.resources.size() < kMaxReportedResources) {
        report.resources.push_back(objectResult(outcome.ref, model::BundleState::kErrApplied, outcome.error));
      }
    }
  }
  for (const auto& outcome : outcomes) {
    if (!outcome.replaced.empty()) {
      replaced.push_back(outcome.replaced);
    }
    if (!outcome.apply_failed && !outcome.ready) {
      not_ready.push_back(outcome.ref.describe() + ": " + truncateMessage(outcome.message));
      if (report.resources.size() < kMaxReportedResources) {
        report.resources.push_back(objectResult(outcome.ref, model::BundleState::kNotReady, outcome.message));
      }
    }
  }
  if (!failed.empty() && only_conflicts) {
    report.state = model::BundleState::kErrApplied;
    report.reason = std::string(kReasonOwnershipConflict);
    report.message = listMessage("", failed);
  } else if (!failed.empty() && only_unmanaged) {
    report.state = model::BundleState::kErrApplied;
    report.reason = std::string(kReasonUnmanagedObject);
    report.message = listMessage("", failed);
  } else if (!failed.empty() && only_outside) {
    report.state = model::BundleState::kErrApplied;
    report.reason = std::string(kReasonOutsideNamespaces);
    report.message = listMessage("", failed);
  } else if (!failed.empty()) {
    report.state = model::BundleState::kErrApplied;
    report.reason = std::string(kReasonApplyFailed);
    report.message = listMessage(
        "failed to apply " + std::to_string(failed.size()) + " of " + std::to_string(outcomes.size()) + " objects",
        failed);
  } else if (!not_ready.empty()) {
    report.state = model::BundleState::kNotReady;
    report.reason = std::string(kReasonNotReady);
    report.message = listMessage(
        std::to_string(not_ready.size()) + " of " + std::to_string(outcomes.size()) + " objects not ready", not_ready);
  }
  if (!replaced.empty()) {
    // Said whatever the state: a replacement changes UIDs, which a user of the objects must be able to see.
    report.message =
        report.message.empty() ? listMessage("", replaced) : report.message + "; " + listMessage("", replaced);
  }
  return report;
}

BundleReport bundleFailure(model::BundleState state, std::string_view reason, std::string message) {
  return BundleReport{.state = state, .reason = std::string(reason), .message = truncateMessage(std::move(message))};
}

}  // namespace flotilla::agent

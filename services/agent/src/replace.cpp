// Objects whose change the API server refuses because a field is immutable (docs/pipeline.md "Helm release names"):
// e.g. a Deployment whose spec.selector carries a Helm release name that changed with a bundle rename. Such an
// object cannot be updated in place, so the agent deletes and re-creates it (its UID changes) and says so in the
// bundle's status, instead of failing every apply of the bundle from then on.
#include <algorithm>
#include <chrono>
#include <thread>

#include "flotilla/agent/applier.h"
#include "flotilla/core/log.h"
#include "flotilla/kube/errors.h"

namespace flotilla::agent {
namespace {

constexpr std::string_view kImmutable = "field is immutable";

//! The field path in front of ": Invalid value:" (or ": Forbidden:") that ends at `end` in `message`, or "".
std::string fieldBefore(std::string_view message, size_t end) {
  size_t start = end;
  while (start > 0) {
    char c = message[start - 1];
    if (c == ' ' || c == '[' || c == ',' || c == ';') {
      break;
    }
    --start;
  }
  return std::string(message.substr(start, end - start));
}

}  // namespace

std::vector<std::string> immutableFields(const Error& error) {
  std::vector<std::string> fields;
  if (error.kind != ErrorKind::kInvalid || kube::httpStatusOf(error) != 422) {
    return fields;
  }
  const std::string_view message = error.message;
  size_t from = 0;
  while (true) {
    size_t hit = message.find(kImmutable, from);
    if (hit == std::string_view::npos) {
      break;
    }
    from = hit + kImmutable.size();
    size_t marker = std::string_view::npos;
    for (std::string_view label : {": Invalid value:", ": Forbidden:"}) {
      size_t at = message.rfind(label, hit);
      if (at != std::string_view::npos && (marker == std::string_view::npos || at > marker)) {
        marker = at;
      }
    }
    std::string field = marker == std::string_view::npos ? std::string() : fieldBefore(message, marker);
    if (field.empty()) {
      field = "(unnamed)";
    }
    if (std::find(fields.begin(), fields.end(), field) == fields.end()) {
      fields.push_back(std::move(field));
    }
  }
  return fields;
}

std::string replacedMessage(const ObjectRef& ref, const std::vector<std::string>& fields) {
  std::string list;
  for (const auto& field : fields) {
    list += (list.empty() ? "" : ", ") + field;
  }
  return ref.describe() + " was deleted and re-created (new UID) because " +
         (fields.size() == 1 ? "field " + list + " is" : "fields " + list + " are") + " immutable";
}

Result<Json> Applier::replaceIfImmutable(const PlannedObject& planned, const ApplyRequest& request, Error refused,
                                         ObjectOutcome& outcome) {
  auto fields = immutableFields(refused);
  if (fields.empty()) {
    return fail(std::move(refused));
  }
  kube::KubeClient& client = clientFor(request);
  const ObjectRef& ref = planned.ref;
  const std::string note = replacedMessage(ref, fields);
  log::warn("replacing an object: its change touches an immutable field",
            {{"object", ref.describe()}, {"owner", request.owner}, {"error", refused.message}});
  Status removed = client.remove(ref.api_version, ref.kind, ref.ns, ref.name);
  if (!removed.ok() && removed.error().kind != ErrorKind::kNotFound) {
    return fail(removed.error().kind, "replacing (immutable field): delete: " + removed.error().message,
                removed.error().where);
  }
  // The delete may take a moment (finalizers, graceful deletion): the re-create waits for the old object to go.
  const auto deadline = std::chrono::steady_clock::now() + options_.replace_timeout;
  while (true) {
    auto live = client.get(ref.api_version, ref.kind, ref.ns, ref.name);
    if (!live.ok() && live.error().kind == ErrorKind::kNotFound) {
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline || stopping_()) {
      return fail(ErrorKind::kTransient, "replacing (immutable field): " + ref.describe() + " is still being deleted");
    }
    std::this_thread::sleep_for(options_.crd_poll);
  }
  auto created = client.apply(planned.object,
                              kube::ApplyOptions{.field_manager = std::string(kFieldManager), .force = request.force});
  if (!created.ok()) {
    return fail(created.error().kind, "replacing (immutable field): re-create: " + created.error().message,
                created.error().where);
  }
  metrics_.counter("objects_replaced_total", "Objects deleted and re-created because a changed field is immutable")
      .Increment();
  log::info("object replaced", {{"object", ref.describe()}, {"owner", request.owner}, {"note", note}});
  outcome.replaced = note;
  return created;
}

}  // namespace flotilla::agent

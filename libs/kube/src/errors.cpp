#include "flotilla/kube/errors.h"

#include <cstdlib>

#include "flotilla/core/util.h"

namespace flotilla::kube {
namespace {

constexpr std::string_view kHttpMarker = ": HTTP ";

// Status.details.causes carry what a message may leave out (the conflicting field managers of an apply, the
// failing fields of a validation): appended when the message does not already mention them.
std::string withCauses(std::string message, const Json& status) {
  const Json* causes = status.at({"details", "causes"});
  if (causes == nullptr || !causes->isArray()) {
    return message;
  }
  for (const auto& cause : causes->asArray()) {
    std::string field = cause.getString("field");
    std::string text = cause.getString("message");
    std::string item = field.empty() ? text : field.append(": ").append(text);
    if (!item.empty() && message.find(text) == std::string::npos) {
      message += "; " + item;
    }
  }
  return message;
}

// kube-apiserver answers some server-side apply input errors with 500 instead of 400: the patch does not fit the
// schema ("failed to create typed patch object (...): .data: expected map" / "field not declared in schema" /
// "duplicate entries for key"), see kubernetes/kubernetes#122480 and #139253. They are the caller's input, and
// retrying them as transient would loop forever.
bool isApplyInputError(int http_status, std::string_view message) {
  return http_status == 500 && startsWith(message, "failed to create typed patch object");
}

}  // namespace

ErrorKind errorKindForHttpStatus(int http_status) {
  struct StatusKind {
    int status;
    ErrorKind kind;
  };
  static constexpr StatusKind kKinds[] = {
      {400, ErrorKind::kInvalid},   {422, ErrorKind::kInvalid},   {401, ErrorKind::kPermanent},
      {403, ErrorKind::kPermanent}, {404, ErrorKind::kNotFound},  {409, ErrorKind::kConflict},
      {410, ErrorKind::kConflict},  {408, ErrorKind::kTransient}, {429, ErrorKind::kTransient},
  };
  for (const auto& [status, kind] : kKinds) {
    if (status == http_status) {
      return kind;
    }
  }
  if (http_status >= 500 && http_status <= 599) {
    return ErrorKind::kTransient;
  }
  return ErrorKind::kInternal;
}

Error apiError(int http_status, std::string_view body, std::string_view where) {
  std::string where_text = std::string(where) + std::string(kHttpMarker) + std::to_string(http_status);
  ErrorKind kind = errorKindForHttpStatus(http_status);
  auto parsed = Json::parse(body);
  if (parsed.ok() && parsed->getString("kind") == "Status") {
    std::string message = parsed->getString("message");
    if (message.empty()) {
      message = parsed->getString("reason", "HTTP " + std::to_string(http_status));
    }
    if (isApplyInputError(http_status, message)) {
      kind = ErrorKind::kInvalid;
    }
    return makeError(kind, withCauses(std::move(message), *parsed), std::move(where_text));
  }
  std::string excerpt = trim(body.substr(0, 300));
  return makeError(kind,
                   "HTTP " + std::to_string(http_status) + " without a Status object" +
                       (excerpt.empty() ? std::string() : ": " + excerpt),
                   std::move(where_text));
}

Error statusError(const Json& status, std::string_view where) {
  int code = static_cast<int>(status.getInt("code", 500));
  return apiError(code, status.dump(), where);
}

int httpStatusOf(const Error& error) {
  auto pos = error.where.rfind(kHttpMarker);
  if (pos == std::string::npos) {
    return 0;
  }
  return std::atoi(error.where.c_str() + pos + kHttpMarker.size());
}

bool isGone(const Error& error) {
  return error.kind == ErrorKind::kConflict && httpStatusOf(error) == 410;
}

}  // namespace flotilla::kube

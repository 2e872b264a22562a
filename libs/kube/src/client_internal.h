// Helpers shared by client.cpp, discovery.cpp and watch.cpp (private to libs/kube).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/kube/client.h"
#include "flotilla/kube/http_client.h"

namespace flotilla::kube::detail {

//! "/api/v1" for the core group, "/apis/<group>/<version>" otherwise.
std::string groupVersionPath(const std::string& group, const std::string& version);

//! The body of an answer as JSON; kInternal when the server sent something else.
Result<Json> parseBody(const HttpResponse& response, std::string_view where);

//! Appends "?key=value" or "&key=value" (value percent-encoded) to `target`.
void appendQuery(std::string& target, std::string_view key, std::string_view value);

//! The event type named by a watch line's "type" ("ADDED", ...); nullopt for a name this client does not know.
std::optional<WatchEventType> watchEventTypeFromName(std::string_view name);

}  // namespace flotilla::kube::detail

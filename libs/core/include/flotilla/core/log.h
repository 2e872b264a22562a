// flotilla/core/log.h
//
// JSON-lines logging: one object per line on stderr with time, level, service, msg and any context
// fields (gitrepo, bundle, cluster, commit, ...). Thread-safe. Never log secrets: callers pass values
// that are safe to show; `redact()` exists for the rare value that must be mentioned but not shown.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "flotilla/core/json.h"

namespace flotilla::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

using Field = std::pair<std::string_view, Json>;
using Fields = std::initializer_list<Field>;

//! Names the process in every line ("poller", "agent", ...).
void setService(std::string service);
void setLevel(Level level);
//! Parses "debug|info|warn|error"; unknown names keep the current level.
void setLevel(std::string_view name);
//! Replaces the output (stderr by default); tests capture lines with this. Pass nullptr to restore.
void setSink(std::function<void(std::string_view line)> sink);

void write(Level level, std::string_view message, Fields fields = {});
inline void debug(std::string_view message, Fields fields = {}) {
  write(Level::kDebug, message, fields);
}
inline void info(std::string_view message, Fields fields = {}) {
  write(Level::kInfo, message, fields);
}
inline void warn(std::string_view message, Fields fields = {}) {
  write(Level::kWarn, message, fields);
}
inline void error(std::string_view message, Fields fields = {}) {
  write(Level::kError, message, fields);
}

//! Builds the line without writing it (exposed for tests).
std::string formatLine(Level level, std::string_view message, Fields fields);

//! Current UTC time as RFC 3339 with milliseconds ("2026-12-02T10:00:00.123Z").
std::string nowRfc3339();

}  // namespace flotilla::log

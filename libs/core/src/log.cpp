#include "flotilla/core/log.h"

#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "flotilla/core/time.h"

namespace flotilla::log {
namespace {

struct LoggerState {
  std::mutex mutex;
  std::string service = "flotilla";
  Level level = Level::kInfo;
  std::function<void(std::string_view)> sink;
};

LoggerState& state() {
  static LoggerState instance;
  return instance;
}

std::string_view levelName(Level level) {
  static constexpr std::array<std::string_view, 4> kNames = {"debug", "info", "warn", "error"};
  auto index = static_cast<size_t>(level);
  return index < kNames.size() ? kNames[index] : "info";
}

}  // namespace

void setService(std::string service) {
  std::lock_guard lock(state().mutex);
  state().service = std::move(service);
}
void setLevel(Level level) {
  std::lock_guard lock(state().mutex);
  state().level = level;
}
void setLevel(std::string_view name) {
  if (name == "debug") {
    setLevel(Level::kDebug);
  } else if (name == "info") {
    setLevel(Level::kInfo);
  } else if (name == "warn") {
    setLevel(Level::kWarn);
  } else if (name == "error") {
    setLevel(Level::kError);
  }
}
void setSink(std::function<void(std::string_view)> sink) {
  std::lock_guard lock(state().mutex);
  state().sink = std::move(sink);
}

std::string nowRfc3339() {
  return formatRfc3339(std::chrono::system_clock::now());
}

std::string formatLine(Level level, std::string_view message, Fields fields) {
  std::string service;
  {
    std::lock_guard lock(state().mutex);
    service = state().service;
  }
  // Fixed keys first so lines read well; context fields follow in the order given.
  std::string line = "{\"time\":" + jsonQuote(nowRfc3339()) + ",\"level\":" + jsonQuote(levelName(level)) +
                     ",\"service\":" + jsonQuote(service) + ",\"msg\":" + jsonQuote(message);
  for (const auto& [key, value] : fields) {
    if (value.isNull() || (value.isString() && value.asString().empty())) {
      continue;
    }
    line += "," + jsonQuote(key) + ":" + value.dump();
  }
  line += "}";
  return line;
}

void write(Level level, std::string_view message, Fields fields) {
  {
    std::lock_guard lock(state().mutex);
    if (level < state().level) {
      return;
    }
  }
  std::string line = formatLine(level, message, fields);
  std::lock_guard lock(state().mutex);
  if (state().sink) {
    state().sink(line);
    return;
  }
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace flotilla::log

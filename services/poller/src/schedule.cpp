#include "flotilla/poller/schedule.h"

#include <random>

#include "flotilla/core/clock.h"
#include "flotilla/core/util.h"

namespace flotilla::poller {

namespace {

uint64_t hash64(std::string_view key) {
  const std::string digest = sha256Raw(key);
  uint64_t value = 0;
  for (size_t i = 0; i < 8; ++i) {
    value = (value << 8) | static_cast<unsigned char>(digest[i]);
  }
  return value;
}

}  // namespace

Millis phaseOffset(std::string_view workspace, std::string_view name, Millis interval) {
  std::string key;
  key.reserve(workspace.size() + name.size() + 1);
  key.append(workspace).append("/").append(name);
  return phaseOffsetOf(key, interval);
}

Millis phaseOffsetOf(std::string_view key, Millis interval) {
  if (interval.count() <= 0) {
    return Millis(0);
  }
  return Millis(static_cast<int64_t>(hash64(key) % static_cast<uint64_t>(interval.count())));
}

Millis gridJitter(std::string_view key, int64_t grid_ms, Millis interval) {
  const int64_t limit = std::min<int64_t>(interval.count() / 20, 500);
  if (limit <= 0) {
    return Millis(0);
  }
  std::string seed(key);
  seed.append("@").append(std::to_string(grid_ms));
  return Millis(static_cast<int64_t>(hash64(seed) % static_cast<uint64_t>(limit + 1)));
}

int64_t nextGridTime(int64_t now_ms, Millis interval, Millis phase, Millis min_gap) {
  const int64_t step = std::max<int64_t>(interval.count(), 1);
  const int64_t earliest = now_ms + std::max<int64_t>(min_gap.count(), 0);
  // Smallest t >= earliest with t = phase (mod step); the arithmetic stays non-negative for epoch times.
  int64_t base = earliest - ((earliest - phase.count()) % step + step) % step;
  if (base < earliest) {
    base += step;
  }
  return base;
}

Millis backoffDelay(int64_t failures, Millis interval, Millis cap) {
  const int64_t base = std::max<int64_t>(interval.count(), 1000);
  if (failures <= 1) {
    return Millis(std::min(base, std::max<int64_t>(cap.count(), 1000)));
  }
  int64_t delay = base;
  for (int64_t i = 1; i < failures && delay < cap.count(); ++i) {
    delay *= 2;
  }
  return Millis(std::max<int64_t>(std::min(delay, cap.count()), 1000));
}

Millis pollJitter(Millis interval) {
  const int64_t limit = std::min<int64_t>(interval.count() / 20, 500);
  if (limit <= 0) {
    return Millis(0);
  }
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return Millis(std::uniform_int_distribution<int64_t>(0, limit)(rng));
}

std::string formatEpochMillis(int64_t epoch_ms) {
  return formatRfc3339Millis(epoch_ms);
}

int64_t nowEpochMillis() {
  return systemClock().nowMillis();
}

}  // namespace flotilla::poller

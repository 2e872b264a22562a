// flotilla/core/clock.h
//
// Time as a dependency: code that stamps, waits or measures takes a Clock&, so tests drive time with a
// ManualClock instead of sleeping. systemClock() is the real one and the default everywhere.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

#include "flotilla/core/time.h"

namespace flotilla {

class Clock {
 public:
  using Duration = std::chrono::milliseconds;
  using SteadyTime = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  //! Wall time, for timestamps that are stored or shown.
  [[nodiscard]] virtual SystemTime now() const = 0;
  //! Monotonic time, for deadlines and measured durations.
  [[nodiscard]] virtual SteadyTime steadyNow() const = 0;
  //! Blocks the caller for `duration` (a ManualClock advances instead of blocking).
  virtual void sleepFor(Duration duration) = 0;

  //! now() as milliseconds since the Unix epoch.
  [[nodiscard]] int64_t nowMillis() const { return epochMillis(now()); }
  //! now() as "2026-12-02T10:00:00.123Z".
  [[nodiscard]] std::string nowRfc3339() const { return formatRfc3339(now()); }
};

//! The real clocks (system_clock, steady_clock, std::this_thread::sleep_for).
class SystemClock final : public Clock {
 public:
  [[nodiscard]] SystemTime now() const override;
  [[nodiscard]] SteadyTime steadyNow() const override;
  void sleepFor(Duration duration) override;
};

//! The process-wide SystemClock.
Clock& systemClock();

//! A clock that moves only when told to: advance() and set() move both wall and monotonic time; sleepFor()
//! advances by the duration and returns at once, so a retry loop under test runs without real waiting.
//! Thread-safe.
class ManualClock final : public Clock {
 public:
  //! Starts at `start` (wall time); monotonic time starts at an arbitrary fixed point.
  explicit ManualClock(SystemTime start = SystemTime(std::chrono::seconds(1'796'205'600)));  // 2026-12-02T10:00:00Z

  [[nodiscard]] SystemTime now() const override;
  [[nodiscard]] SteadyTime steadyNow() const override;
  void sleepFor(Duration duration) override;

  //! Moves both clocks forward by `duration`.
  void advance(Duration duration);
  //! Sets wall time to `at` (monotonic time moves forward by the same amount if `at` is later, never back).
  void set(SystemTime at);
  //! Sum of every sleepFor() so far (tests assert on the backoff a loop used).
  [[nodiscard]] Duration slept() const;

 private:
  //! Wall and monotonic time, read together.
  [[nodiscard]] std::pair<SystemTime, SteadyTime> read() const;

  mutable std::mutex mutex_;
  SystemTime wall_;
  SteadyTime steady_;
  Duration slept_{0};
};

}  // namespace flotilla

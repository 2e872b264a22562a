#include "flotilla/core/clock.h"

#include <thread>

namespace flotilla {

SystemTime SystemClock::now() const {
  return std::chrono::system_clock::now();
}

Clock::SteadyTime SystemClock::steadyNow() const {
  return std::chrono::steady_clock::now();
}

void SystemClock::sleepFor(Duration duration) {
  std::this_thread::sleep_for(duration);
}

Clock& systemClock() {
  static SystemClock clock;
  return clock;
}

ManualClock::ManualClock(SystemTime start) : wall_(start), steady_(std::chrono::hours(1)) {}

std::pair<SystemTime, Clock::SteadyTime> ManualClock::read() const {
  std::lock_guard lock(mutex_);
  return {wall_, steady_};
}

SystemTime ManualClock::now() const {
  return read().first;
}

Clock::SteadyTime ManualClock::steadyNow() const {
  return read().second;
}

void ManualClock::sleepFor(Duration duration) {
  std::lock_guard lock(mutex_);
  if (duration.count() > 0) {
    wall_ += duration;
    steady_ += duration;
    slept_ += duration;
  }
}

void ManualClock::advance(Duration duration) {
  std::lock_guard lock(mutex_);
  wall_ += duration;
  steady_ += duration;
}

void ManualClock::set(SystemTime at) {
  std::lock_guard lock(mutex_);
  if (at > wall_) {
    steady_ += std::chrono::duration_cast<std::chrono::steady_clock::duration>(at - wall_);
  }
  wall_ = at;
}

Clock::Duration ManualClock::slept() const {
  std::lock_guard lock(mutex_);
  return slept_;
}

}  // namespace flotilla

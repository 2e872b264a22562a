// flotilla/poller/schedule.h
//
// When a GitRepo is polled. Each GitRepo gets a stable phase inside its polling interval (a hash of
// workspace/name), so a thousand GitRepos with the same 15s interval spread over the 15 seconds instead of
// hitting the git hosts together, and the spread survives restarts and is the same on every replica. Polls land
// on the grid `phase + k * interval` (wall clock, milliseconds since the epoch) plus a small jitter. Failures
// back off exponentially from the interval up to a cap. Pure functions, so the rules are unit-tested.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace flotilla::poller {

using Millis = std::chrono::milliseconds;

//! The GitRepo's stable offset inside `interval`: sha256("<workspace>/<name>") mod interval, in [0, interval).
Millis phaseOffset(std::string_view workspace, std::string_view name, Millis interval);

//! The same rule for any key: sha256(key) mod interval. The poller keys it by mirror (normalized repository URL),
//! so every GitRepo on one URL with the same interval is due at the same instant and one ls-remote serves them
//! all, while different URLs spread over the interval.
Millis phaseOffsetOf(std::string_view key, Millis interval);

//! A jitter in [0, min(interval / 20, 500 ms)] that is pseudo-random per (key, grid point) but the same for every
//! GitRepo with that key, so GitRepos sharing a mirror stay together while mirrors do not fire in lockstep.
Millis gridJitter(std::string_view key, int64_t grid_ms, Millis interval);

//! The first grid point `phase + k * interval` that is at least `min_gap` after `now` (both in milliseconds
//! since the epoch). min_gap keeps a poll that finished just before a grid point from running again at once.
int64_t nextGridTime(int64_t now_ms, Millis interval, Millis phase, Millis min_gap);

//! Delay before retry number `failures` (1 = the first retry): interval * 2^(failures-1), at most `cap`, at least
//! 1 s. failures <= 0 gives the interval itself.
Millis backoffDelay(int64_t failures, Millis interval, Millis cap);

//! A random jitter in [0, min(interval / 20, 500 ms)], added to each timed poll.
Millis pollJitter(Millis interval);

//! RFC 3339 UTC with milliseconds for a time given in milliseconds since the epoch ("2026-12-02T10:00:00.123Z").
std::string formatEpochMillis(int64_t epoch_ms);

//! Now, in milliseconds since the epoch.
int64_t nowEpochMillis();

}  // namespace flotilla::poller

// flotilla/core/fault.h
//
// Fault-injection points for crash tests: a named place in a multi-step protocol (e.g. the agent between
// adopting an object and rewriting the old owner's inventory) where a test can make the process die with SIGKILL,
// exactly as `kill -9` would, and then check that a restart converges. A point fires only when its name is listed
// in the environment variable FLOTILLA_FAULT_POINTS (comma-separated) of the process; nothing else turns it on,
// so in production it is one branch on a cached empty list. Each point is documented next to the protocol step it
// guards (docs/pipeline.md "Ownership handover" and "Deletes that cascade").
#pragma once

#include <string_view>

namespace flotilla::fault {

//! The environment variable that lists the points to fire.
inline constexpr std::string_view kEnvVar = "FLOTILLA_FAULT_POINTS";

//! Kills the process with SIGKILL (after a log line naming the point) when `name` is listed in
//! FLOTILLA_FAULT_POINTS; otherwise does nothing. The list is read once, at the first call.
void point(std::string_view name);

//! Whether `name` is listed (for tests of the list parsing and for logging at start-up).
bool armed(std::string_view name);

}  // namespace flotilla::fault

// flotilla/cli/events.h
//
// `flotilla events [--since <duration|RFC 3339>] [--type <type|glob>] [-f] [-o json|text]`: the hub's public
// CloudEvents (stream FLOTILLA_EVENTS, docs/events/cloudevents.md) replayed from the stream — all of it, or from
// --since — one per line: the CloudEvent's JSON (-o json, the default) or a short line (-o text). Without -f it
// stops at the last event stored when it started; with -f it keeps following until SIGINT or SIGTERM. It reads
// through an ordered consumer (bus::StreamReader), so the readonly identity suffices. Exit codes: 0 ok (also after
// an interrupted -f), 1 error (the hub unreachable, no events stream), 2 usage (a bad flag value, named).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include "flotilla/cli/hub_reader.h"
#include "flotilla/core/result.h"
#include "flotilla/events/cloudevents.h"

namespace flotilla::cli {

struct EventsArgs {
  ConnectSettings connect;
  std::string since;  //!< "" = from the first stored event
  std::string type;   //!< "" = every type
  bool follow = false;
  std::string output = "json";  //!< json or text
};

//! --since: a duration back from `now` ("90s", "10m", "1h30m", "2d") or an RFC 3339 time; nullopt for "". kInvalid
//! naming --since otherwise.
Result<std::optional<std::chrono::system_clock::time_point>> parseSince(std::string_view value,
                                                                        std::chrono::system_clock::time_point now);
//! --type: a type ("io.flotilla.bundle.ready") or a glob whose `*` matches any characters ("io.flotilla.bundle.*");
//! kInvalid naming --type unless it starts with io.flotilla. and has only lower-case letters, digits, '.', '*'.
Status checkTypeFilter(std::string_view pattern);
//! Whether `type` matches the --type value ("" matches every type).
bool typeMatches(std::string_view pattern, std::string_view type);
//! The subjects to read for a --type value: flotilla.events.<object>.> when the object is spelled out, else all.
std::string subjectFor(std::string_view pattern);
//! The -o text line: time, type, subject and what the data says in a few words.
std::string textLine(const events::CloudEvent& event);

//! Runs the command; `stop` ends -f (set by the signal handler of the CLI). Exit codes as above.
int runEvents(const EventsArgs& args, std::ostream& out, std::ostream& err, const std::atomic<bool>& stop);

}  // namespace flotilla::cli

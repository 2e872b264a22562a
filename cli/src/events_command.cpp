// `flotilla events`: replays and follows the public CloudEvents (flotilla/cli/events.h).
#include <csignal>
#include <ostream>

#include <CLI/CLI.hpp>

#include "command_line.h"
#include "flotilla/bus/stream_reader.h"
#include "flotilla/cli/cli.h"
#include "flotilla/cli/events.h"
#include "flotilla/core/time.h"
#include "flotilla/events/subjects.h"

namespace flotilla::cli {

namespace {

constexpr std::string_view kSinceForms =
    "a duration back from now (30s, 10m, 1h30m, 2d) or an RFC 3339 time (2026-12-02T10:00:00Z)";
constexpr std::string_view kTypeForms =
    "a type such as io.flotilla.bundle.ready or a glob such as io.flotilla.bundle.*";
//! How long one wait for the next event lasts: how quickly -f notices an interrupt.
constexpr std::chrono::milliseconds kPollInterval{250};

//! Seconds in one unit of a --since duration, 0 for an unknown unit.
int64_t unitSeconds(char unit) {
  switch (unit) {
    case 's':
      return 1;
    case 'm':
      return 60;
    case 'h':
      return 3600;
    case 'd':
      return 86400;
    default:
      return 0;
  }
}

//! "1h30m" -> 5400 seconds; nullopt unless it is one or more <digits><unit> parts.
std::optional<int64_t> durationSeconds(std::string_view text) {
  int64_t total = 0;
  size_t at = 0;
  while (at < text.size()) {
    size_t digits = at;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
      ++digits;
    }
    if (digits == at || digits == text.size() || digits - at > 9 || unitSeconds(text[digits]) == 0) {
      return std::nullopt;
    }
    total += std::stoll(std::string(text.substr(at, digits - at))) * unitSeconds(text[digits]);
    at = digits + 1;
  }
  return at == 0 ? std::nullopt : std::optional<int64_t>(total);
}

//! Whether `text` matches the glob `pattern` (`*` = any characters, also none).
bool globMatches(std::string_view pattern, std::string_view text) {
  if (pattern.empty()) {
    return text.empty();
  }
  if (pattern.front() == '*') {
    for (size_t skip = 0; skip <= text.size(); ++skip) {
      if (globMatches(pattern.substr(1), text.substr(skip))) {
        return true;
      }
    }
    return false;
  }
  return !text.empty() && pattern.front() == text.front() && globMatches(pattern.substr(1), text.substr(1));
}

//! A few words about what the event's data says: counts of a roll-up, a report's message, a commit.
std::string dataWords(const Json& data) {
  if (const Json* summary = data.find("summary"); summary != nullptr && summary->isObject()) {
    return std::to_string(summary->getInt("ready")) + "/" + std::to_string(summary->getInt("desiredReady")) + " ready";
  }
  for (const char* key : {"message", "commit", "deploymentID", "manifestID"}) {
    if (std::string value = data.getString(key); !value.empty()) {
      return std::string(key) + "=" + value.substr(0, 80);
    }
  }
  return {};
}

std::atomic<bool> interrupted{false};

extern "C" void onInterrupt(int /*signal*/) {
  interrupted.store(true);
}

//! Prints one stored message if its type matches; one that is not a CloudEvent is skipped with a warning on err.
void printEvent(const bus::Message& message, const EventsArgs& args, std::ostream& out, std::ostream& err) {
  auto json = Json::parse(message.data());
  auto event = json.ok() ? events::decodeCloudEvent(*json) : Result<events::CloudEvent>(fail(json.error()));
  if (!event.ok()) {
    err << "warning: skipping a message on " << message.subject()
        << " that is not a CloudEvent: " << event.error().describe() << "\n";
    return;
  }
  if (!typeMatches(args.type, event->type)) {
    return;
  }
  out << (args.output == "text" ? textLine(*event) : json->dump()) << "\n" << std::flush;
}

}  // namespace

Result<std::optional<std::chrono::system_clock::time_point>> parseSince(std::string_view value,
                                                                        std::chrono::system_clock::time_point now) {
  using Since = std::optional<std::chrono::system_clock::time_point>;
  if (value.empty()) {
    return Since();
  }
  if (auto seconds = durationSeconds(value)) {
    return Since(now - std::chrono::seconds(*seconds));
  }
  if (auto at = parseRfc3339(value)) {
    return Since(*at);
  }
  return fail(ErrorKind::kInvalid,
              "--since: expected " + std::string(kSinceForms) + ", got \"" + std::string(value) + "\"");
}

Status checkTypeFilter(std::string_view pattern) {
  const std::string_view rest =
      pattern.starts_with(events::kCloudEventTypePrefix) ? pattern.substr(events::kCloudEventTypePrefix.size()) : "";
  bool valid = !rest.empty() && rest.front() != '.' && rest.back() != '.' && rest.find("..") == std::string::npos;
  for (char c : rest) {
    valid = valid && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '*');
  }
  // Without a wildcard a type names an object and what happened to it.
  if (valid && rest.find('*') == std::string_view::npos && rest.find('.') == std::string_view::npos) {
    valid = false;
  }
  if (!valid) {
    return fail(ErrorKind::kInvalid,
                "--type: expected " + std::string(kTypeForms) + ", got \"" + std::string(pattern) + "\"");
  }
  return {};
}

bool typeMatches(std::string_view pattern, std::string_view type) {
  return pattern.empty() || globMatches(pattern, type);
}

std::string subjectFor(std::string_view pattern) {
  const std::string_view rest =
      pattern.starts_with(events::kCloudEventTypePrefix) ? pattern.substr(events::kCloudEventTypePrefix.size()) : "";
  const size_t dot = rest.find('.');
  const std::string_view object = rest.substr(0, dot);
  if (dot == std::string_view::npos || object.empty() || object.find('*') != std::string_view::npos) {
    return std::string(events::kEventsFilter);
  }
  return events::eventsFilter(object);
}

std::string textLine(const events::CloudEvent& event) {
  std::string line = event.time + "  " + event.type + "  " + event.subject;
  if (std::string words = dataWords(event.data); !words.empty()) {
    line += "  " + words;
  }
  return line;
}

int runEvents(const EventsArgs& args, std::ostream& out, std::ostream& err, const std::atomic<bool>& stop) {
  auto since = parseSince(args.since, std::chrono::system_clock::now());
  if (!since.ok()) {
    return usageError(err, since.error().message, "events");
  }
  if (!args.type.empty()) {
    if (auto checked = checkTypeFilter(args.type); !checked.ok()) {
      return usageError(err, checked.error().message, "events");
    }
  }
  auto hub = openHub(args.connect, {});
  if (!hub.ok()) {
    return failWith(err, hub.error().describe());
  }
  bus::StreamReaderOptions options{.stream = std::string(events::kEventsStream), .subject = subjectFor(args.type)};
  if (*since) {
    options.start_time_ns = std::chrono::duration_cast<std::chrono::nanoseconds>((*since)->time_since_epoch()).count();
  }
  auto reader = bus::StreamReader::open(hub->js, options);
  if (!reader.ok()) {
    return failWith(
        err, "cannot read the events stream " + std::string(events::kEventsStream) + ": " + reader.error().describe());
  }
  bool caught_up = reader->startedEmpty();
  while (!stop.load() && (args.follow || !caught_up)) {
    auto next = reader->next(kPollInterval);
    if (!next.ok()) {
      return failWith(err, "reading the events stream: " + next.error().describe());
    }
    if (!next->has_value()) {
      continue;
    }
    printEvent(**next, args, out, err);
    auto meta = (*next)->metadata();
    caught_up = meta.ok() && meta->num_pending == 0;
  }
  return kExitOk;
}

void defineEvents(CLI::App& command, Invocation& invocation) {
  command.add_option("--since", invocation.events.since, "only events stored since then: " + std::string(kSinceForms))
      ->type_name("WHEN");
  command.add_option("--type", invocation.events.type, "only events of this type: " + std::string(kTypeForms))
      ->type_name("TYPE");
  command.add_flag("-f,--follow", invocation.events.follow, "keep printing new events until interrupted");
}

int runEventsCommand(Invocation& invocation, const Streams& io) {
  EventsArgs args = invocation.events;
  args.connect = invocation.global.connect;
  args.output = invocation.global.output;
  interrupted.store(false);
  auto previous_int = std::signal(SIGINT, onInterrupt);
  auto previous_term = std::signal(SIGTERM, onInterrupt);
  const int code = runEvents(args, io.out, io.err, interrupted);
  std::signal(SIGINT, previous_int);
  std::signal(SIGTERM, previous_term);
  return code;
}

}  // namespace flotilla::cli

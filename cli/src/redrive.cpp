#include "flotilla/cli/redrive.h"

#include <ostream>
#include <vector>

#include <CLI/CLI.hpp>

#include "command_line.h"
#include "flotilla/events/subjects.h"
#include "flotilla/events/terminated.h"

namespace flotilla::cli {

namespace {

struct Terminated {
  std::string key;
  events::MessageTerminated record;
};

Result<std::vector<Terminated>> loadRecords(bus::KeyValue& status, std::ostream& err) {
  auto keys = status.keys(events::kTerminatedFilter);
  FLOTILLA_TRY(keys);
  std::vector<Terminated> out;
  for (const auto& key : *keys) {
    auto entry = status.get(key);
    if (!entry.ok()) {
      continue;  // removed meanwhile
    }
    auto json = Json::parse(entry->value);
    auto record =
        json.ok() ? events::decodeMessageTerminated(*json) : Result<events::MessageTerminated>(fail(json.error()));
    if (!record.ok()) {
      err << "skipping unreadable record " << key << ": " << record.error().describe() << "\n";
      continue;
    }
    out.push_back(Terminated{key, std::move(record).value()});
  }
  return out;
}

bool selected(const events::MessageTerminated& record, const std::string& selector) {
  if (selector == "all") {
    return true;
  }
  return selector == record.consumer || selector == record.consumer + "/" + std::to_string(record.stream_sequence);
}

std::string nameOf(const events::MessageTerminated& record) {
  return record.stream + "/" + record.consumer + "/" + std::to_string(record.stream_sequence);
}

//! Republishes one terminated message (or finds it superseded) and removes its record; false on failure.
bool redriveOne(const HubConnection& hub, const Terminated& item, std::ostream& out, std::ostream& err) {
  const auto& record = item.record;
  auto message = hub.js->getMessage(record.stream, record.stream_sequence);
  if (!message.ok()) {
    err << nameOf(record) << ": cannot read the message back (" << message.error().describe()
        << "); it is older than its stream's max age: re-derive it with `flotilla force-sync`; record kept\n";
    return false;
  }
  if (record.stream != events::kDeployStream) {
    auto last = hub.js->getLastMessage(record.stream, record.subject);
    if (last.ok() && last->sequence() > record.stream_sequence) {
      if (auto removed = hub.bucket(events::kStatusBucket).remove(item.key); !removed.ok()) {
        err << nameOf(record) << ": " << removed.error().describe() << "\n";
        return false;
      }
      out << nameOf(record) << ": superseded by sequence " << last->sequence() << "; record removed\n";
      return true;
    }
  }
  const std::string original = record.msg_id.empty() ? nameOf(record) : record.msg_id;
  auto sent = hub.js->publish(record.subject, message->data(), original + "/redrive/" + record.id);
  if (!sent.ok()) {
    err << nameOf(record) << ": cannot republish: " << sent.error().describe() << "\n";
    return false;
  }
  if (auto removed = hub.bucket(events::kStatusBucket).remove(item.key); !removed.ok()) {
    err << nameOf(record) << ": republished, but the record stays: " << removed.error().describe() << "\n";
    return false;
  }
  out << nameOf(record) << ": republished on " << record.subject << " as sequence " << sent->sequence
      << (sent->duplicate ? " (already redriven)" : "") << "\n";
  return true;
}

void list(const std::vector<Terminated>& records, std::ostream& out) {
  if (records.empty()) {
    out << "no terminated messages\n";
    return;
  }
  for (const auto& item : records) {
    const auto& r = item.record;
    out << nameOf(r) << "  " << r.subject << "  " << r.reason << "  deliveries=" << r.deliveries << "  " << r.time
        << "  " << r.message << "\n";
  }
  out << "redrive with: flotilla redrive all | <consumer> | <consumer>/<sequence>\n";
}

}  // namespace

int runRedrive(const RedriveArgs& args, std::ostream& out, std::ostream& err) {
  auto hub = openHub(args.connect, {std::string(events::kStatusBucket)});
  if (!hub.ok()) {
    err << "error: " << hub.error().describe() << "\n";
    return 1;
  }
  auto records = loadRecords(hub->bucket(events::kStatusBucket), err);
  if (!records.ok()) {
    err << "error: cannot read the hub: " << records.error().describe() << "\n";
    return 1;
  }
  if (args.selector.empty()) {
    list(*records, out);
    return 0;
  }
  bool ok = true;
  size_t matched = 0;
  for (const auto& item : *records) {
    if (selected(item.record, args.selector)) {
      ++matched;
      ok = redriveOne(*hub, item, out, err) && ok;
    }
  }
  if (matched == 0) {
    out << "no terminated messages match \"" << args.selector << "\"\n";
  }
  return ok ? 0 : 1;
}

void defineRedrive(CLI::App& command, Invocation& invocation) {
  command.add_option("selector", invocation.name, "all, <consumer> or <consumer>/<sequence>; none lists the records");
}

int runRedriveCommand(Invocation& invocation, const Streams& io) {
  return runRedrive({.connect = invocation.global.connect, .selector = invocation.name}, io.out, io.err);
}

}  // namespace flotilla::cli

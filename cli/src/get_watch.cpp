// `flotilla get <kind> -w`: the table, then a row each time an object of that kind changes, until interrupted.
// Changes are noticed through a watch of the status bucket (every stage writes its status there: the poller's
// gitrepo.*, the bundler's bundle-render.*, the scheduler's bd.* and summaries, cluster summaries on
// registrations, heartbeats and offline transitions); on each burst the records are read again and the rows whose
// columns changed are printed. Nothing is polled on a timer.
#include <algorithm>
#include <map>
#include <ostream>
#include <sstream>

#include "command_line.h"
#include "flotilla/cli/cli.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"

namespace flotilla::cli {

namespace {

//! The table row of one view: the table of that view alone without its header.
std::string rowOf(Kind kind, const Json& view, bool with_workspace, std::chrono::system_clock::time_point now) {
  std::string table = renderTable(kind, {view}, with_workspace, now);
  auto newline = table.find('\n');
  return newline == std::string::npos ? std::string() : table.substr(newline + 1);
}

std::string objectKey(const Json& view) {
  const Json* ns = view.at({"metadata", "namespace"});
  const Json* name = view.at({"metadata", "name"});
  const Json* cluster = view.at({"spec", "cluster"});
  auto text = [](const Json* j) { return j != nullptr && j->isString() ? j->asString() : std::string(); };
  return text(ns) + "/" + text(cluster) + "/" + text(name);
}

}  // namespace

Result<bool> waitForChange(bus::KvWatcher& watcher, std::chrono::steady_clock::time_point deadline) {
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return false;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    auto entry = watcher.next(std::clamp(left, std::chrono::milliseconds(1), std::chrono::milliseconds(3'600'000)));
    FLOTILLA_TRY(entry);
    if (entry->has_value()) {
      // A burst comes as one change: take what is already queued behind it.
      for (uint64_t pending = (*entry)->delta; pending > 0;) {
        auto more = watcher.next(std::chrono::milliseconds(0));
        if (!more.ok() || !more->has_value()) {
          break;
        }
        pending = (**more).delta;
      }
      return true;
    }
  }
}

int runGetWatch(const Invocation& invocation, Kind kind, const Streams& io) {
  const GlobalFlags& global = invocation.global;
  auto hub = openHub(global.connect, {std::string(events::kStatusBucket)});
  if (!hub.ok()) {
    return failWith(io.err, hub.error().describe());
  }
  // Watch first, then read: a change between the two is seen.
  auto watcher = hub->bucket(events::kStatusBucket).watch(">", {.updates_only = true, .meta_only = true});
  if (!watcher.ok()) {
    return failWith(io.err, "cannot watch the hub: " + watcher.error().describe());
  }
  hub->finished_watchers.push_back(std::move(watcher).value());  // the hub closes its connection before it goes
  bus::KvWatcher& changes = hub->finished_watchers.back();
  const Filter filter{.workspace = global.workspace, .name = invocation.name};
  const bool with_workspace = global.workspace.empty();
  // Rows are compared as of one fixed time, so an age growing is not a change; they are printed as of now.
  const auto reference = std::chrono::system_clock::time_point{};
  std::map<std::string, std::string> shown;
  std::ostringstream later_warnings;  // named once, with the table
  for (bool first = true;; first = false) {
    // Each read on a connection of its own, closed after it (hub_reader.h says why).
    auto snapshot = readHub(global.connect, first ? io.err : later_warnings);
    if (!snapshot.ok()) {
      return failWith(io.err, snapshot.error().describe());
    }
    later_warnings.str("");
    auto views = listViews(*snapshot, kind, filter);
    const auto now = std::chrono::system_clock::now();
    if (first) {
      if (views.empty()) {
        io.err << "No " << kindName(kind) << " objects found" << (with_workspace ? "" : " in " + global.workspace)
               << "; watching.\n";
      } else {
        io.out << renderTable(kind, views, with_workspace, now);
      }
    }
    for (const auto& view : views) {
      std::string compared = rowOf(kind, view, with_workspace, reference);
      auto& last = shown[objectKey(view)];
      if (!first && compared != last) {
        io.out << rowOf(kind, view, with_workspace, now);
      }
      last = std::move(compared);
    }
    io.out << std::flush;
    auto changed = waitForChange(changes, std::chrono::steady_clock::time_point::max());
    if (!changed.ok()) {
      return failWith(io.err, "the watch failed: " + changed.error().describe());
    }
  }
}

}  // namespace flotilla::cli

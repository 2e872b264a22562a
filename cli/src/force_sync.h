// flotilla/cli force_sync.h
//
// `flotilla force-sync <gitrepo> [-n ws]` (or `<ws>/<gitrepo>`): asks the pipeline to run again for a GitRepo's
// current commit, like Fleet's `forceSyncGeneration`. It increments `spec.forceSyncGeneration` (and
// `metadata.generation`) of the stored record in KV `gitrepos` with a revision-checked update, retried when
// another writer got in between; the poller then republishes the current commit under a new Msg-Id.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "flotilla/bus/kv.h"
#include "flotilla/cli/hub_reader.h"
#include "flotilla/core/result.h"

namespace flotilla::cli {

//! Increments spec.forceSyncGeneration of the GitRepo stored at `key` and returns the new value. kNotFound when
//! the key is absent, kInvalid when the record does not decode, kConflict when it kept changing over 5 attempts.
Result<int64_t> bumpForceSyncGeneration(bus::KeyValue& gitrepos, const std::string& key);

//! The command: `name` is "<name>" or "<ws>/<name>"; `workspace` is -n (may be empty: then the name must exist in
//! exactly one workspace). Exit codes as runCli. (runForceSync in command_line.h calls it.)
int forceSync(const std::string& name, const std::string& workspace, const ConnectSettings& connect, std::ostream& out,
              std::ostream& err);

}  // namespace flotilla::cli

// flotilla/harness/server_base.h
//
// What the harness servers (NatsServer, GitServer) share: a static start() hands each out through a unique_ptr,
// it keeps all its files in its own temp dir, and destroying it stops its processes (the derived destructor) and
// then removes that dir (this base's destructor, which runs after it).
#pragma once

#include <string>

#include "flotilla/core/result.h"

namespace flotilla::harness {

class ServerBase {
 public:
  ServerBase(const ServerBase&) = delete;
  ServerBase& operator=(const ServerBase&) = delete;
  ServerBase(ServerBase&&) = delete;
  ServerBase& operator=(ServerBase&&) = delete;

  //! The server's temp dir ("" until makeDir succeeded).
  [[nodiscard]] const std::string& dir() const { return dir_; }

 protected:
  ServerBase() = default;
  //! Removes the temp dir, unless FLOTILLA_KEEP_TEST_DIRS or FLOTILLA_KEEP_TEMP is set (to look at it after a run).
  ~ServerBase();

  //! Creates the server's temp dir, a fresh one named after `prefix`.
  Status makeDir(std::string_view prefix);

 private:
  std::string dir_;
};

}  // namespace flotilla::harness

// flotilla/harness/nats_server.h
//
// A real nats-server (the pinned one scripts/setup builds into .tools/bin, JetStream on) for integration tests. Each
// instance gets free ports on 127.0.0.1 and its own temp dir (store dir, log file, optional config file); destroying it
// stops the server and removes the dir. restart() keeps the ports and the store dir, so JetStream state survives it.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "flotilla/core/process.h"
#include "flotilla/core/result.h"
#include "flotilla/harness/local_port.h"
#include "flotilla/harness/server_base.h"

namespace flotilla::harness {

struct NatsServerOptions {
  //! Appended after the standard arguments (-js -a 127.0.0.1 -p ... -sd ... -m ...).
  std::vector<std::string> extra_args;
  //! If set, written to <dir>/nats.conf and passed with -c (users, permissions, TLS). Command-line flags win over
  //! the file for port, address and store dir. "$DIR" in the text is replaced by the server's temp dir.
  std::string config;
  bool jetstream = true;
  //! URL scheme of url(): "nats", or "tls" for a server that requires TLS.
  std::string scheme = "nats";
  std::chrono::milliseconds start_timeout = std::chrono::seconds(20);
  //! Path of the binary; empty means defaultNatsServerBinary().
  std::string binary;
};

//! One nats-server process. Not copyable or movable: tests hold it through a unique_ptr. The server is killed if
//! the thread that started it exits (so a crashed test leaves nothing running): start it from the test's main
//! thread or another thread that outlives it.
class NatsServer : public ServerBase {
 public:
  //! Starts a server on fresh free ports and waits until it serves clients and /healthz is OK. A failure
  //! carries the tail of the server's log.
  static Result<std::unique_ptr<NatsServer>> start(NatsServerOptions options = {});

  //! Stops the server; then ServerBase removes its temp dir.
  ~NatsServer();

  //! "nats://127.0.0.1:<port>" (or the configured scheme).
  [[nodiscard]] std::string url() const;
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] int monitorPort() const { return monitor_port_; }
  //! The nats-server process (benchmarks read its CPU time from /proc).
  [[nodiscard]] pid_t pid() const { return process_.pid(); }
  //! The JetStream store dir (-sd), in dir() (the server's temp dir, where tests may put cert files too).
  [[nodiscard]] std::string storeDir() const { return dir() + "/store"; }
  [[nodiscard]] bool running();
  //! GET /healthz (the full check) answers 200: in a cluster, JetStream is current with a meta leader.
  [[nodiscard]] bool jetStreamHealthy() const;

  //! Graceful stop (SIGTERM); the store dir stays.
  Status stop();
  //! stop() if running, then start again on the same ports and store dir and wait until ready.
  Status restart();
  //! SIGKILL, no shutdown: simulates a crash. restart() brings it back with the same store.
  void kill9();
  //! Everything the server logged so far (all runs).
  [[nodiscard]] std::string logText() const;
  //! The last `lines` lines of the log.
  [[nodiscard]] std::string logTail(size_t lines = 30) const;

 private:
  NatsServer() = default;
  Status launch();
  Status waitReady();
  //! Where the server's output goes (all runs), in dir().
  [[nodiscard]] std::string logFile() const { return dir() + "/nats-server.log"; }

  NatsServerOptions options_;
  std::string config_file_;  //!< in dir(), "" without options_.config
  int port_ = 0;
  int monitor_port_ = 0;
  Process process_;
};

//! The pinned nats-server scripts/setup builds: $FLOTILLA_TOOLS_DIR/nats-server, else
//! ${FLOTILLA_SOURCE_DIR}/.tools/bin/nats-server. No fallback to PATH: tests run against one known version.
std::string defaultNatsServerBinary();

//! A server shared by every test in this process that only needs a plain JetStream server, started on first use
//! and stopped at exit. Tests sharing it must use unique stream/bucket names (see uniqueName) and must not
//! stop or restart it; tests that do need their own NatsServer.
Result<NatsServer*> sharedNatsServer();

//! prefix + "_" + random hex: a stream, bucket or subject token no other test uses.
std::string uniqueName(std::string_view prefix);

}  // namespace flotilla::harness

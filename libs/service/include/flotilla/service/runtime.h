// flotilla/service/runtime.h
//
// What every Flotilla process shares around its handlers: configuration from flags and environment, JSON
// logging, the /metrics, /healthz and /readyz endpoints, and an orderly shutdown on SIGTERM/SIGINT. A service's
// main() builds a Runtime, wires its implementations and handlers, then calls waitForShutdown().
#pragma once

#include <atomic>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"
#include "flotilla/http/server.h"
#include "flotilla/service/component.h"

namespace flotilla::service {

//! Flags of the form --name=value or --name value, with FLOTILLA_<NAME> environment variables as fallback
//! (dashes become underscores, upper-cased: --nats-url -> FLOTILLA_NATS_URL).
class Config {
 public:
  //! Parses argv. Unknown flags are an error naming the flag (kInvalid); `known` lists the accepted names
  //! with their help text, so --help can print them.
  static Result<Config> parse(int argc, const char* const* argv, std::map<std::string, std::string> known);

  [[nodiscard]] std::string get(const std::string& name, const std::string& fallback = {}) const;
  [[nodiscard]] int64_t getInt(const std::string& name, int64_t fallback) const;
  [[nodiscard]] bool getBool(const std::string& name, bool fallback = false) const;
  [[nodiscard]] bool helpRequested() const { return help_; }
  [[nodiscard]] std::string usage(const std::string& program) const;

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, std::string> known_;
  bool help_ = false;
};

//! The flags every service accepts, merged into a service's own by the Runtime.
std::map<std::string, std::string> commonFlags();

//! One condition of a readiness check: while `met` is false the service is not ready, because `why_not`.
struct ReadyCondition {
  bool met;
  const char* why_not;
};

//! For readiness checks: true when every condition is met, else false with `why` = the first unmet one's reason.
bool readyWhen(std::string& why, std::initializer_list<ReadyCondition> conditions);

class Runtime {
 public:
  //! Blocks SIGTERM/SIGINT for every thread created after this (so only waitForShutdown() sees them),
  //! configures logging and starts the HTTP endpoints on --http-addr (default 127.0.0.1:0).
  static Result<std::unique_ptr<Runtime>> start(const std::string& service, const Config& config);

  ~Runtime();

  [[nodiscard]] Metrics& metrics() { return metrics_; }
  [[nodiscard]] uint16_t httpPort() const;
  //! Readiness checks: all must pass for /readyz to return 200. `check` sets `why` when it fails.
  void addReadinessCheck(std::string name, std::function<bool(std::string& why)> check);
  //! The component's ready() as a check. Shared: the HTTP server may still ask while main unwinds.
  void addReadinessCheck(std::string name, std::shared_ptr<const Component> component);
  //! Blocks until SIGTERM or SIGINT (or requestShutdown()), then returns so main can stop handlers in order.
  void waitForShutdown();
  void requestShutdown();
  [[nodiscard]] bool stopping() const { return stopping_; }

  //! Starts the HTTP server with the standard routes plus `extra` routes. Called by start(); exposed so a
  //! service that needs webhook routes can restart it with them before serving traffic.
  Status serveHttp(const std::map<std::string, http::Handler>& extra);

 private:
  Runtime(std::string service, std::string http_address);

  std::string service_;
  std::string http_address_;
  Metrics metrics_;
  std::unique_ptr<http::Server> http_;
  std::mutex checks_mutex_;
  std::vector<std::pair<std::string, std::function<bool(std::string&)>>> checks_;
  std::atomic<bool> stopping_{false};
};

}  // namespace flotilla::service

// flotilla/http/server.h
//
// A small HTTP/1.1 server on Boost.Beast for what every Flotilla service exposes: /metrics (Prometheus text),
// /healthz and /readyz, plus routes a service adds (the poller's webhooks). Handlers are plain functions from
// Request to Response and run on the server's own thread; they must not block for long. Request bodies are
// capped (413 beyond the cap), slow clients time out, connections are capped (503 beyond the cap) and each source
// address may be rate-limited (429), so a misbehaving peer cannot pin memory or threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"

namespace flotilla::http {

struct Request {
  std::string method;                          //!< "GET", "POST", ...
  std::string path;                            //!< target without the query string
  std::string query;                           //!< after '?', undecoded
  std::map<std::string, std::string> headers;  //!< names lower-cased
  std::string body;
  std::string remote_address;

  //! A header value or empty; `name` is matched case-insensitively.
  [[nodiscard]] std::string header(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
  std::map<std::string, std::string> headers;

  static Response text(int status, std::string body);
  static Response json(int status, std::string body);
};

using Handler = std::function<Response(const Request&)>;

struct ServerOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 0;                      //!< 0: the OS picks a free port (read it back with port())
  size_t max_body_bytes = 1u << 20;       //!< larger bodies get 413
  std::chrono::seconds read_timeout{15};  //!< per request, so slow clients cannot hold a connection forever
  //! Called (on the server thread) with the method, path, headers and remote address of a request rejected with
  //! 413, so a service can count and log it by its own labels. Optional.
  std::function<void(const Request&)> on_body_too_large;
  //! Connections served at once; one more is answered 503 and closed without its request being read. 0 = no cap.
  size_t max_connections = 0;
  //! Per source address (the TCP peer; X-Forwarded-For is not trusted): a token bucket of `rate_burst` requests
  //! refilled at `rate_per_second`. A request over it is answered 429 after its headers, its body unread, and the
  //! connection closed. rate_per_second 0 = no limit.
  double rate_per_second = 0;
  double rate_burst = 1;
  //! Called (on the server thread) with the remote address and the status (503 or 429) of each refusal above, so
  //! a service can count and log it by its own labels. Optional.
  std::function<void(const std::string& remote, int status)> on_refused;
};

class Server {
 public:
  //! Binds and starts serving on a background thread. Routes are keyed by routeKey(method, path) and matched
  //! on the exact path; method "*" accepts any method.
  static Result<std::unique_ptr<Server>> start(ServerOptions options, std::map<std::string, Handler> routes);

  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  [[nodiscard]] uint16_t port() const;
  //! Connections being served now (refused ones not counted); for tests and diagnostics.
  [[nodiscard]] size_t activeConnections() const;
  void stop();

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

//! Route key for start(): "GET /healthz". Method "*" matches any method.
std::string routeKey(std::string_view method, std::string_view path);

//! The routes every service serves: /metrics from `metrics`, /healthz (process alive), /readyz (`ready()`
//! true -> 200, else 503 with the reason it returns through `why`).
std::map<std::string, Handler> standardRoutes(const Metrics& metrics, std::function<bool(std::string& why)> ready);

}  // namespace flotilla::http

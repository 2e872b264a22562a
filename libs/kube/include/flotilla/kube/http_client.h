// flotilla/kube/http_client.h
//
// The HTTPS client under the Kubernetes client: Boost.Beast over OpenSSL, kept behind this header so Beast is
// compiled in one translation unit. It verifies the server (CA bundle, host name or IP address SAN), presents a
// client certificate when configured, keeps a small pool of keep-alive connections (reconnecting transparently
// when the server closed an idle one), applies a deadline to every request, and can stream a response body
// (watches). Thread-safe: requests from several threads share the pool.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"
#include "flotilla/kube/kubeconfig.h"

namespace flotilla::kube {

struct HttpRequest {
  std::string method = "GET";
  std::string target;  //!< path and query, already escaped ("/api/v1/namespaces?limit=5")
  std::string body;
  std::string content_type;  //!< for the body; empty with no body
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::milliseconds timeout{30000};  //!< deadline for the whole exchange (streams: until headers)
};

struct HttpResponse {
  int status = 0;
  std::string body;
  std::string content_type;
};

struct HttpClientOptions {
  std::chrono::milliseconds connect_timeout{10000};  //!< TCP connect plus TLS handshake
  size_t max_idle_connections = 4;                   //!< idle keep-alive connections kept for reuse
  size_t max_body_bytes = 512u << 20;                //!< a larger response is an error (kTransient)
  std::string user_agent = "flotilla";
  Metrics* metrics = nullptr;  //!< where connection counters go (may be null)
};

class HttpStream;

class HttpClient {
 public:
  //! Builds the TLS context from `config` (CA, client certificate, verification mode). kInvalid when the PEM
  //! material does not load (naming which). Connections are made lazily.
  static Result<std::unique_ptr<HttpClient>> create(const Kubeconfig& config, HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  //! One request/response exchange on a pooled connection. Any HTTP status is a successful Result; only
  //! transport failures are errors: kTransient (refused, reset, timeout, truncated), kPermanent for a server
  //! certificate that fails verification (wrong CA, name mismatch: retrying will not help).
  Result<HttpResponse> send(const HttpRequest& request);
  //! Sends `request` on a dedicated connection and returns once the response headers arrived; the body is read
  //! with HttpStream::read. The connection is never pooled.
  Result<std::unique_ptr<HttpStream>> stream(const HttpRequest& request);

  //! Connections opened so far (tests check keep-alive reuse with it).
  [[nodiscard]] size_t connectionsOpened() const;
  //! Requests retried on a fresh connection because a pooled one had been closed by the server.
  [[nodiscard]] size_t staleRetries() const;
  //! Closes every idle pooled connection (tests; also useful after a fork).
  void closeIdle();

 private:
  struct Impl;
  explicit HttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

//! A response whose body arrives over time (a watch). Single-threaded: one reader.
class HttpStream {
 public:
  ~HttpStream();
  HttpStream(const HttpStream&) = delete;
  HttpStream& operator=(const HttpStream&) = delete;

  //! The response's HTTP status code.
  [[nodiscard]] int status() const;
  //! The response's Content-Type header.
  [[nodiscard]] const std::string& contentType() const;
  //! Waits up to `timeout` for more of the body and returns what arrived (de-chunked). An empty string means
  //! nothing arrived in time (not an error); check done() for the end of the body. Transport failures are
  //! kTransient.
  Result<std::string> read(std::chrono::milliseconds timeout);
  //! The whole body has been read (the server ended the response).
  [[nodiscard]] bool done() const;

 private:
  friend class HttpClient;
  struct Impl;
  explicit HttpStream(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace flotilla::kube

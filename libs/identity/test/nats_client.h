// A raw libnats client for the permission tests: connects with a .creds file, a custom inbox prefix and TLS
// files, and records every asynchronous error the server sends (a "Permissions Violation" arrives that way).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nats/nats.h>

#include "flotilla/core/result.h"

namespace flotilla::identity::testclient {

struct ClientOptions {
  std::string url;
  std::string creds_file;
  std::string inbox_prefix;  //!< "" = libnats' default _INBOX
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

class NatsClient {
 public:
  //! Connects; the error carries libnats' status text and last error (an auth failure, a TLS refusal).
  static Result<std::unique_ptr<NatsClient>> connect(const ClientOptions& options);
  ~NatsClient();
  NatsClient(const NatsClient&) = delete;
  NatsClient& operator=(const NatsClient&) = delete;

  [[nodiscard]] natsConnection* connection() const { return connection_; }
  [[nodiscard]] jsCtx* jetstream() const { return js_; }

  //! Publishes (core NATS) and flushes; a denied publish is not an error here, it arrives as an async error.
  Status publish(const std::string& subject, const std::string& data = "x");
  //! Waits up to `timeout` for an async error whose text contains `needle`; true when one arrived.
  bool awaitError(const std::string& needle, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  //! Every async error so far.
  std::vector<std::string> errors();

 private:
  NatsClient() = default;
  static Result<std::unique_ptr<NatsClient>> connectOnce(const ClientOptions& options);
  static void onError(natsConnection* nc, natsSubscription* sub, natsStatus status, void* closure);

  natsConnection* connection_ = nullptr;
  jsCtx* js_ = nullptr;
  std::mutex mutex_;
  std::vector<std::string> errors_;
};

//! libnats' text of `status` plus the thread's last error detail.
std::string natsErrorText(natsStatus status);

}  // namespace flotilla::identity::testclient

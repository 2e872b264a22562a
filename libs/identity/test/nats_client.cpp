#include "nats_client.h"

#include <thread>

namespace flotilla::identity::testclient {

std::string natsErrorText(natsStatus status) {
  std::string text = natsStatus_GetText(status);
  const char* detail = nats_GetLastError(nullptr);
  if (detail != nullptr && *detail != '\0') {
    text += ": ";
    text += detail;
  }
  return text;
}

void NatsClient::onError(natsConnection* nc, natsSubscription* /*sub*/, natsStatus status, void* closure) {
  auto* self = static_cast<NatsClient*>(closure);
  const char* last = nullptr;
  natsConnection_GetLastError(nc, &last);
  std::string text = std::string(natsStatus_GetText(status)) + ": " + (last != nullptr ? last : "");
  std::lock_guard lock(self->mutex_);
  self->errors_.push_back(text);
}

Result<std::unique_ptr<NatsClient>> NatsClient::connect(const ClientOptions& options) {
  // libnats 3.4.1 signs about one server nonce in 256 so that the server refuses a valid .creds login;
  // bus::Connection logs in again with a new nonce, and so does this client (else a test of valid credentials
  // fails one run in a few hundred). Credentials that are really refused fail every attempt.
  constexpr int kAttempts = 4;
  for (int attempt = 1;; ++attempt) {
    auto connected = connectOnce(options);
    const bool refused =
        !connected.ok() && connected.error().message.find("Authorization Violation") != std::string::npos;
    if (connected.ok() || !refused || options.creds_file.empty() || attempt == kAttempts) {
      return connected;
    }
  }
}

Result<std::unique_ptr<NatsClient>> NatsClient::connectOnce(const ClientOptions& options) {
  std::unique_ptr<NatsClient> client(new NatsClient());
  natsOptions* opts = nullptr;
  natsStatus s = natsOptions_Create(&opts);
  if (s == NATS_OK) {
    s = natsOptions_SetURL(opts, options.url.c_str());
  }
  if (s == NATS_OK) {
    s = natsOptions_SetErrorHandler(opts, &NatsClient::onError, client.get());
  }
  if (s == NATS_OK) {
    s = natsOptions_SetMaxReconnect(opts, 0);
  }
  if (s == NATS_OK && !options.creds_file.empty()) {
    s = natsOptions_SetUserCredentialsFromFiles(opts, options.creds_file.c_str(), nullptr);
  }
  if (s == NATS_OK && !options.inbox_prefix.empty()) {
    s = natsOptions_SetCustomInboxPrefix(opts, options.inbox_prefix.c_str());
  }
  if (s == NATS_OK && !options.ca_file.empty()) {
    s = natsOptions_SetSecure(opts, true);
    if (s == NATS_OK) {
      s = natsOptions_LoadCATrustedCertificates(opts, options.ca_file.c_str());
    }
  }
  if (s == NATS_OK && !options.cert_file.empty()) {
    s = natsOptions_LoadCertificatesChain(opts, options.cert_file.c_str(), options.key_file.c_str());
  }
  if (s == NATS_OK) {
    s = natsConnection_Connect(&client->connection_, opts);
  }
  std::string text = s == NATS_OK ? std::string() : natsErrorText(s);
  natsOptions_Destroy(opts);
  if (s != NATS_OK) {
    return fail(ErrorKind::kPermanent, text, "natsConnection_Connect");
  }
  s = natsConnection_JetStream(&client->js_, client->connection_, nullptr);
  if (s != NATS_OK) {
    return fail(ErrorKind::kInternal, natsErrorText(s), "natsConnection_JetStream");
  }
  return client;
}

NatsClient::~NatsClient() {
  jsCtx_Destroy(js_);
  natsConnection_Destroy(connection_);
}

Status NatsClient::publish(const std::string& subject, const std::string& data) {
  natsStatus s = natsConnection_PublishString(connection_, subject.c_str(), data.c_str());
  if (s == NATS_OK) {
    s = natsConnection_FlushTimeout(connection_, 5000);
  }
  if (s != NATS_OK) {
    return fail(ErrorKind::kTransient, natsErrorText(s), "publish " + subject);
  }
  return {};
}

bool NatsClient::awaitError(const std::string& needle, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& error : errors()) {
      if (error.find(needle) != std::string::npos) {
        return true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::vector<std::string> NatsClient::errors() {
  std::lock_guard lock(mutex_);
  return errors_;
}

}  // namespace flotilla::identity::testclient

// flotilla/agent/enrollment.h
//
// Registration tokens on the agent's side (docs/pipeline.md "Registration tokens"): with --registration-creds (a
// token's credentials, `flotilla auth issue --role registration`) and --creds-store (where the agent keeps the
// credentials it is given, mode 0600) the agent
//   - at start uses the stored credentials when they are its cluster's and have not expired (a registered agent
//     re-registers with them; the token is not read), else generates a user key, asks the hub's registrar on
//     flotilla.registration.<token> for credentials of --cluster-name and stores them;
//   - renews them in the background at two thirds of their lifetime on flotilla.register.<cluster>.renew, with a
//     new key; the hub connection reads the store at its next (re)connect, at the latest when the server closes it
//     as the old credentials expire.
// A refused request (deregistered, name taken, revoked), an expired token or an unreachable hub is logged, counted
// (credentials_requests_total{request="enroll"|"renew", result}) and retried with backoff; the log names the flag.
// With --creds-secret the credentials are also kept in a Secret of the agent's cluster and restored from it into
// the store file (creds_secret_total{step="read"|"write", result}).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "flotilla/bus/connection.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"
#include "flotilla/service/background_thread.h"
#include "flotilla/service/runtime.h"

namespace flotilla::kube {
class KubeClient;
}  // namespace flotilla::kube

namespace flotilla::agent {

struct EnrollmentOptions {
  std::string registration_creds;  //!< the token's .creds file (read only when the store has no usable credentials)
  std::string creds_store;         //!< where the issued .creds are written
  std::string cluster;
  bus::ConnectOptions connect;  //!< servers and TLS; creds and inbox prefix are set per request
  std::chrono::milliseconds request_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds retry_base{std::chrono::seconds(1)};
  std::chrono::milliseconds retry_max{std::chrono::minutes(1)};
  //! --creds-secret <namespace>/<name>: the credentials are also kept in that Secret (key "creds") of the agent's
  //! cluster, and restored from it when the store file has none (a new pod); `kube` is the agent's client.
  std::string secret_namespace;
  std::string secret_name;
  std::shared_ptr<kube::KubeClient> kube;
};

//! --registration-creds and --creds-store with their help texts.
std::map<std::string, std::string> enrollmentFlags();
//! nullopt without --registration-creds. kInvalid: one flag without the other, with --nats-creds, or without
//! --cluster-name.
Result<std::optional<EnrollmentOptions>> enrollmentOptionsFrom(const service::Config& config);

//! What one attempt came to.
enum class CredentialsResult {
  kStored,   //!< usable stored credentials, nothing asked
  kIssued,   //!< new credentials stored
  kRefused,  //!< the hub refused (the reason is in the error)
  kFailed,   //!< no answer, expired token, unwritable store, ...
};

class CredentialsKeeper {
 public:
  CredentialsKeeper(EnrollmentOptions options, Metrics& metrics);
  ~CredentialsKeeper();
  CredentialsKeeper(const CredentialsKeeper&) = delete;
  CredentialsKeeper& operator=(const CredentialsKeeper&) = delete;

  //! Usable stored credentials, else enrollment with the token, retried with backoff until it works, `deadline`
  //! passes (then the error of the last attempt: the agent exits and is restarted, like an unreachable hub) or stop().
  Status obtain(std::chrono::milliseconds deadline = std::chrono::minutes(5));
  //! One enrollment attempt: stored credentials if usable, else a request with the token.
  Result<CredentialsResult> enrollOnce();
  //! One renewal of the stored credentials.
  Result<CredentialsResult> renewOnce();
  //! Starts the background renewal (after obtain()).
  void start();
  void stop();

  //! The credentials file the hub connection uses, and the inbox prefix of the cluster's agent role.
  [[nodiscard]] const std::string& credsFile() const { return options_.creds_store; }
  [[nodiscard]] std::string inboxPrefix() const;
  //! When the stored credentials should be renewed (nullopt: none stored, or they never expire).
  [[nodiscard]] std::optional<std::chrono::system_clock::time_point> renewalDue() const;

 private:
  Result<CredentialsResult> request(std::string_view kind, const std::string& creds_file, const std::string& inbox,
                                    const std::string& subject, const std::string& body, const std::string& seed);
  void count(std::string_view kind, std::string_view result);
  //! The Secret's credentials written to the store file when they are the cluster's and usable; false otherwise.
  bool restoreFromSecret();
  //! Writes `creds` to the Secret; a failure is logged and counted, the store file still has them.
  void saveToSecret(const std::string& creds);
  void countSecret(std::string_view step, std::string_view result);
  void renewLoop();

  EnrollmentOptions options_;
  Metrics& metrics_;
  //! The renewal; its sleepFor() also paces obtain()'s retries, so stop() ends those too.
  service::BackgroundThread renewal_;
};

}  // namespace flotilla::agent

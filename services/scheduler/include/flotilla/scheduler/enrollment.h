// flotilla/scheduler/enrollment.h
//
// The registrar (docs/pipeline.md "Registration tokens"): with --registration-signing-key the scheduler gives agents
// their own credentials. It answers, in the queue group "scheduler" (replicas share the requests):
//
//   flotilla.registration.<token>      EnrollRequest {cluster, publicKey} from a token's credentials (the server
//                                      binds the subject to them) -> a user JWT of role agent for the cluster
//   flotilla.register.<cluster>.renew  RenewRequest {jwt, publicKey, signature} from the cluster's agent -> a new
//                                      JWT for the new key
//
// It keeps one record per enrolled cluster in the clusters bucket, enrollment.<cluster> (EnrollmentRecord: the
// token, the current and the previous user key, the expiry), and refuses:
//   enroll  a cluster name that is not a DNS-1123 label (invalid); a deregistered one (its tombstone exists); a name
//           whose credentials from another token have not expired, or a cluster registered without a token
//           (taken); the same token may enroll its cluster again (an agent that lost its stored credentials)
//   renew   credentials this registrar did not sign or that are not the cluster's (unknown); a cluster whose
//           deregistration finished — tombstone and no registration record left (deregistered; its enrollment
//           record is retired: retireEnrollment); a key that is neither the record's current nor previous one, or no
//           record (revoked: the deregistration removed it, or newer credentials replaced these)
// Every answer is logged and counted: enrollments_total{request="enroll"|"renew", result="issued"|<reason>}.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "flotilla/bus/connection.h"
#include "flotilla/bus/kv.h"
#include "flotilla/core/metrics.h"
#include "flotilla/core/result.h"
#include "flotilla/identity/enrollment.h"
#include "flotilla/service/component.h"
#include "flotilla/service/runtime.h"

namespace flotilla::scheduler {

//! The clusters-bucket key of a cluster's enrollment record: enrollment.<cluster>.
std::string enrollmentKey(std::string_view cluster);

//! What the registrar stores per enrolled cluster.
struct EnrollmentRecord {
  std::string cluster;
  std::string token;         //!< the registration token that enrolled it
  std::string key;           //!< the user key of the latest credentials
  std::string previous_key;  //!< the key those replaced ("" after an enrollment)
  std::string issued;        //!< RFC 3339
  std::string expires;       //!< RFC 3339, of the latest credentials
};
Json encode(const EnrollmentRecord& record);
Result<EnrollmentRecord> parseEnrollmentRecord(std::string_view data);

//! Ends `cluster`'s enrollment as its deregistration finishes: the user keys of enrollment.<cluster> (the latest and
//! the previous) are added to the tombstone's credentialKeys (compare-and-set; `flotilla auth revoke --cluster`
//! revokes them at the server), then the record is removed, so those credentials are never renewed again. Without a
//! record nothing happens; without a tombstone (withdrawn) only the record goes. An unreadable record or tombstone
//! is counted (invalid_records_total) and logged, and the record still goes.
Status retireEnrollment(bus::KeyValue& clusters, const std::string& cluster, Metrics& metrics);

struct RegistrarOptions {
  identity::AgentSigner signer;
  std::chrono::seconds creds_ttl{std::chrono::hours(720)};
};

//! --registration-signing-key, --registration-account, --agent-creds-ttl with their help texts.
std::map<std::string, std::string> registrarFlags();
//! The registrar's options from the flags; nullopt without --registration-signing-key. kInvalid names the flag.
Result<std::optional<RegistrarOptions>> registrarOptionsFrom(const service::Config& config);

class Registrar final : public service::Component {
 public:
  //! `clusters` is the hub's clusters bucket. Nothing is contacted until start().
  Registrar(std::shared_ptr<bus::Connection> connection, std::shared_ptr<bus::KeyValue> clusters, Metrics& metrics,
            RegistrarOptions options);
  ~Registrar() override;

  //! Subscribes to both subjects. Stop with stop() (idempotent, also by the destructor).
  Status start() override;
  void stop() override;
  bool ready(std::string& why) const override;

  //! The answers to one request (what the subscriptions send back; tests call them too).
  identity::CredentialsReply answerEnroll(std::string_view subject, std::string_view data,
                                          identity::Clock::time_point now = identity::Clock::now());
  identity::CredentialsReply answerRenew(std::string_view subject, std::string_view data,
                                         identity::Clock::time_point now = identity::Clock::now());

 private:
  //! The record of `cluster` and its revision (nullopt: none).
  Result<std::optional<std::pair<EnrollmentRecord, uint64_t>>> readRecord(const std::string& cluster);
  //! Why `cluster` may not be enrolled by `token` ("" when it may).
  Result<std::pair<std::string_view, std::string>> enrollRefusal(const std::string& cluster, const std::string& token,
                                                                 const std::optional<EnrollmentRecord>& record,
                                                                 identity::Clock::time_point now);
  //! Signs the JWT and stores the record (create when `revision` is 0, else a compare-and-set update).
  Result<identity::CredentialsReply> issue(EnrollmentRecord record, uint64_t revision, identity::Clock::time_point now);
  identity::CredentialsReply refuse(std::string_view request, std::string_view reason, const std::string& message,
                                    const std::string& cluster);
  identity::CredentialsReply renew(const std::string& cluster, const identity::RenewRequest& request,
                                   identity::Clock::time_point now);

  std::shared_ptr<bus::Connection> connection_;
  std::shared_ptr<bus::KeyValue> clusters_;
  Metrics& metrics_;
  RegistrarOptions options_;
  std::atomic<bool> subscribed_{false};
  bus::Subscription enroll_subscription_;
  bus::Subscription renew_subscription_;
};

}  // namespace flotilla::scheduler

// One network operation against one remote: validated URL, parsed known_hosts and CA bundle, deadline, and the
// libgit2 callbacks that authenticate us and the server. The callbacks record why they refused something
// (CallbackVerdict) so the resulting Error names the real cause. Private to libs/git.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "deadline_stream.h"
#include "flotilla/git/credentials.h"
#include "flotilla/git/known_hosts.h"
#include "flotilla/git/remote.h"
#include "flotilla/git/url.h"
#include "libgit2_util.h"
#include "tls_verify.h"

namespace flotilla::git::detail {

class RemoteSession {
 public:
  //! kInvalid for a bad URL, unparsable known_hosts or CA bundle, or SSH without known_hosts (and without
  //! insecure_ignore_host_key). `credentials` must outlive the session.
  static Result<std::unique_ptr<RemoteSession>> create(const std::string& url, const Credentials& credentials,
                                                       std::chrono::milliseconds timeout, bool allow_local);

  //! Callbacks whose payload is this session.
  git_remote_callbacks callbacks();
  //! The Error for a failed libgit2 call in this session (verdict-aware, URL named, secrets scrubbed).
  Error failure(int code, const char* function) const;
  //! Reads the refs advertised on a connected remote.
  Result<RemoteHeads> heads(git_remote* remote) const;

  [[nodiscard]] const std::string& displayUrl() const { return display_url_; }

 private:
  RemoteSession(const Credentials& credentials) : credentials_(credentials) {}
  static int onCredentials(git_credential** out, const char* url, const char* username_from_url,
                           unsigned int allowed_types, void* payload);
  static int onCertificate(git_cert* cert, int valid, const char* host, void* payload);
  static int onTransferProgress(const git_indexer_progress* stats, void* payload);
  static int onSidebandProgress(const char* text, int length, void* payload);
  int checkX509(const git_cert_x509& cert, bool valid, const std::string& host);
  int checkHostKey(const git_cert_hostkey& cert);
  int reject(CallbackVerdict verdict, std::string detail, int code, int error_class);
  bool expired();

  const Credentials& credentials_;
  GitUrl url_;
  std::string display_url_;
  std::vector<KnownHost> known_hosts_;
  std::optional<TrustStore> trust_;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  //! The deadline of every connection this operation opens (deadline_stream.h); set when there is a timeout.
  std::optional<NetworkDeadline> network_deadline_;
  std::chrono::milliseconds timeout_{0};
  int auth_attempts_ = 0;
  CallbackVerdict verdict_ = CallbackVerdict::kNone;
  std::string detail_;
};

}  // namespace flotilla::git::detail

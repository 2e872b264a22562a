#include "session.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "flotilla/core/ascii.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"

namespace flotilla::git::detail {
namespace {

constexpr const char* kWhere = "RemoteSession";

std::string shortBranch(std::string_view ref) {
  constexpr std::string_view kHeads = "refs/heads/";
  return ref.substr(0, kHeads.size()) == kHeads ? std::string(ref.substr(kHeads.size())) : std::string(ref);
}

std::string presentedFingerprint(const git_cert_hostkey& cert) {
  if ((cert.type & GIT_CERT_SSH_RAW) != 0) {
    return hostKeyFingerprint(std::string_view(cert.hostkey, cert.hostkey_len));
  }
  if ((cert.type & GIT_CERT_SSH_SHA256) != 0) {
    std::string encoded = base64Encode(std::string_view(reinterpret_cast<const char*>(cert.hash_sha256), 32));
    while (!encoded.empty() && encoded.back() == '=') {
      encoded.pop_back();
    }
    return "SHA256:" + encoded;
  }
  return "(unknown)";
}

}  // namespace

Result<std::unique_ptr<RemoteSession>> RemoteSession::create(const std::string& url, const Credentials& credentials,
                                                             std::chrono::milliseconds timeout, bool allow_local) {
  ensureInit();
  auto parsed = parseGitUrl(url, allow_local);
  if (!parsed.ok()) {
    return fail(parsed.error());
  }
  std::unique_ptr<RemoteSession> session(new RemoteSession(credentials));
  session->url_ = std::move(*parsed);
  session->display_url_ = redactUrl(url);
  session->timeout_ = timeout;
  if (timeout.count() > 0) {
    session->deadline_ = std::chrono::steady_clock::now() + timeout;
    session->network_deadline_.emplace(*session->deadline_);
  }
  if (session->url_.scheme == "ssh" && !credentials.insecure_ignore_host_key) {
    if (trim(credentials.known_hosts).empty()) {
      return fail(ErrorKind::kInvalid,
                  "SSH URL " + session->display_url_ +
                      " needs known_hosts for the server (or insecure_ignore_host_key); refusing to trust any key",
                  kWhere);
    }
    auto entries = parseKnownHosts(credentials.known_hosts);
    if (!entries.ok()) {
      return fail(entries.error());
    }
    session->known_hosts_ = std::move(*entries);
  }
  if (session->url_.scheme == "https" && !credentials.ca_bundle.empty()) {
    auto store = TrustStore::fromPem(credentials.ca_bundle);
    if (!store.ok()) {
      return fail(store.error());
    }
    session->trust_.emplace(std::move(*store));
  }
  return session;
}

git_remote_callbacks RemoteSession::callbacks() {
  git_remote_callbacks callbacks = GIT_REMOTE_CALLBACKS_INIT;
  callbacks.credentials = &RemoteSession::onCredentials;
  callbacks.certificate_check = &RemoteSession::onCertificate;
  callbacks.transfer_progress = &RemoteSession::onTransferProgress;
  callbacks.sideband_progress = &RemoteSession::onSidebandProgress;
  callbacks.payload = this;
  return callbacks;
}

Error RemoteSession::failure(int code, const char* function) const {
  GitFailure failure = lastFailure(code, function);
  failure.url = display_url_;
  failure.network = true;
  failure.verdict = verdict_;
  failure.detail = detail_;
  if (verdict_ == CallbackVerdict::kNone && deadline_ &&
      ((network_deadline_ && network_deadline_->cut()) || std::chrono::steady_clock::now() >= *deadline_)) {
    // The connection was cut at the deadline (or the call returned just after it): a timeout, not an outage.
    failure.verdict = CallbackVerdict::kTimedOut;
    failure.detail = "no answer within " + std::to_string(timeout_.count()) + " ms";
  }
  Error error = toError(failure);
  error.message = scrubSecrets(std::move(error.message), credentials_.secrets());
  return error;
}

bool RemoteSession::expired() {
  if (!deadline_ || std::chrono::steady_clock::now() < *deadline_) {
    return false;
  }
  verdict_ = CallbackVerdict::kTimedOut;
  detail_ = "no result within " + std::to_string(timeout_.count()) + " ms";
  git_error_set_str(GIT_ERROR_NET, "operation timed out");
  return true;
}

int RemoteSession::reject(CallbackVerdict verdict, std::string detail, int code, int error_class) {
  verdict_ = verdict;
  detail_ = std::move(detail);
  git_error_set_str(error_class, detail_.c_str());
  return code;
}

int RemoteSession::onCredentials(git_credential** out, const char* url, const char* username_from_url,
                                 unsigned int allowed_types, void* payload) {
  auto* self = static_cast<RemoteSession*>(payload);
  if (self->expired()) {
    return GIT_EUSER;
  }
  const Credentials& creds = self->credentials_;
  // libgit2 follows an initial HTTP redirect; a secret meant for one host must not go to another.
  if (url != nullptr) {
    if (auto asked = parseGitUrl(url); asked.ok() && !equalsIgnoreCase(asked->host, self->url_.host)) {
      log::warn("refusing to send git credentials to another host after a redirect",
                {{"url", self->display_url_}, {"host", asked->host}});
      return self->reject(CallbackVerdict::kAuthRejected,
                          "refusing to send credentials to " + asked->host + " after a redirect", GIT_EAUTH,
                          GIT_ERROR_NET);
    }
  }
  const std::string url_user = username_from_url != nullptr ? username_from_url : "";
  if ((allowed_types & GIT_CREDENTIAL_USERNAME) != 0) {
    // SSH asks for the user name first when the URL has none.
    return git_credential_username_new(out, creds.username.empty() ? "git" : creds.username.c_str());
  }
  // libgit2 asks again after the server refused what we gave; offering the same secret again would loop.
  if (++self->auth_attempts_ > 1) {
    log::warn("git server rejected the credentials", {{"url", self->display_url_}});
    return self->reject(CallbackVerdict::kAuthRejected, "the server rejected the configured credentials", GIT_EAUTH,
                        GIT_ERROR_NET);
  }
  const bool ssh_key = (allowed_types & (GIT_CREDENTIAL_SSH_MEMORY | GIT_CREDENTIAL_SSH_KEY)) != 0;
  if (ssh_key && !creds.ssh_private_key.empty()) {
    const std::string user = !url_user.empty() ? url_user : !creds.username.empty() ? creds.username : "git";
    return git_credential_ssh_key_memory_new(
        out, user.c_str(), creds.ssh_public_key.empty() ? nullptr : creds.ssh_public_key.c_str(),
        creds.ssh_private_key.c_str(), creds.ssh_passphrase.empty() ? nullptr : creds.ssh_passphrase.c_str());
  }
  if ((allowed_types & GIT_CREDENTIAL_USERPASS_PLAINTEXT) != 0) {
    if (!creds.token.empty()) {
      const std::string user = !creds.username.empty() ? creds.username : !url_user.empty() ? url_user : "oauth2";
      return git_credential_userpass_plaintext_new(out, user.c_str(), creds.token.c_str());
    }
    if (!creds.password.empty()) {
      const std::string user = !creds.username.empty() ? creds.username : url_user;
      if (user.empty()) {
        return self->reject(CallbackVerdict::kNoCredentials, "a password is configured but no user name", GIT_EAUTH,
                            GIT_ERROR_NET);
      }
      return git_credential_userpass_plaintext_new(out, user.c_str(), creds.password.c_str());
    }
  }
  log::warn("git server asked for credentials that are not configured", {{"url", self->display_url_}});
  std::string wanted = ssh_key ? "an SSH key" : "a user name and password or a token";
  return self->reject(CallbackVerdict::kNoCredentials, "the server asks for " + wanted + " and none is configured",
                      GIT_EAUTH, GIT_ERROR_NET);
}

int RemoteSession::onCertificate(git_cert* cert, int valid, const char* host, void* payload) {
  auto* self = static_cast<RemoteSession*>(payload);
  if (self->expired()) {
    return GIT_EUSER;
  }
  if (cert->cert_type == GIT_CERT_X509) {
    return self->checkX509(*reinterpret_cast<git_cert_x509*>(cert), valid != 0,
                           host != nullptr ? std::string(host) : self->url_.host);
  }
  if (cert->cert_type == GIT_CERT_HOSTKEY_LIBSSH2) {
    return self->checkHostKey(*reinterpret_cast<git_cert_hostkey*>(cert));
  }
  return self->reject(CallbackVerdict::kCertificateRejected, "unsupported certificate type", GIT_ECERTIFICATE,
                      GIT_ERROR_SSL);
}

int RemoteSession::checkX509(const git_cert_x509& cert, bool valid, const std::string& host) {
  if (credentials_.insecure_skip_tls_verify) {
    log::warn("TLS certificate verification is disabled for this git repository", {{"url", display_url_}});
    return 0;
  }
  if (trust_) {
    // `host` is the one actually connected to, which differs from the URL's after a redirect.
    auto verified = trust_->verify(static_cast<const unsigned char*>(cert.data), cert.len, host);
    if (verified.ok() || valid) {
      return 0;  // the ca_bundle adds to the system CAs
    }
    log::warn("git server certificate rejected", {{"url", display_url_}, {"reason", verified.error().message}});
    return reject(CallbackVerdict::kCertificateRejected, verified.error().message, GIT_ECERTIFICATE, GIT_ERROR_SSL);
  }
  if (!valid) {
    // libgit2 keeps its own error (GIT_PASSTHROUGH); the verdict only improves the message.
    verdict_ = CallbackVerdict::kCertificateRejected;
    detail_ = "not signed by a CA the system trusts, or not issued for " + host + " (set ca_bundle for a private CA)";
    log::warn("git server certificate rejected", {{"url", display_url_}, {"reason", detail_}});
  }
  return GIT_PASSTHROUGH;
}

int RemoteSession::checkHostKey(const git_cert_hostkey& cert) {
  if (credentials_.insecure_ignore_host_key) {
    log::warn("SSH host key checking is disabled for this git repository", {{"url", display_url_}});
    return 0;
  }
  std::string blob;
  std::string sha256;
  if ((cert.type & GIT_CERT_SSH_RAW) != 0 && cert.hostkey != nullptr) {
    blob.assign(cert.hostkey, cert.hostkey_len);
  }
  if ((cert.type & GIT_CERT_SSH_SHA256) != 0) {
    sha256.assign(reinterpret_cast<const char*>(cert.hash_sha256), 32);
  }
  const std::string name = url_.knownHostsName();
  const std::string fingerprint = presentedFingerprint(cert);
  if (blob.empty() && sha256.empty()) {
    return reject(CallbackVerdict::kHostKeyRejected, "the server presented no usable host key", GIT_ECERTIFICATE,
                  GIT_ERROR_SSH);
  }
  std::string why;
  switch (git::checkHostKey(known_hosts_, name, blob, sha256)) {
    case HostKeyVerdict::kMatch:
      return 0;
    case HostKeyVerdict::kUnknownHost:
      why = "no known_hosts entry for " + name + " (server key " + fingerprint + ")";
      break;
    case HostKeyVerdict::kMismatch:
      why = "the key of " + name + " (" + fingerprint +
            ") does not match known_hosts: the host key changed or someone is in the middle";
      break;
    case HostKeyVerdict::kRevoked:
      why = "the key of " + name + " (" + fingerprint + ") is revoked in known_hosts";
      break;
  }
  log::warn("git server host key rejected", {{"url", display_url_}, {"reason", why}});
  return reject(CallbackVerdict::kHostKeyRejected, why, GIT_ECERTIFICATE, GIT_ERROR_SSH);
}

int RemoteSession::onTransferProgress(const git_indexer_progress* /*stats*/, void* payload) {
  return static_cast<RemoteSession*>(payload)->expired() ? GIT_EUSER : 0;
}

int RemoteSession::onSidebandProgress(const char* /*text*/, int /*length*/, void* payload) {
  return static_cast<RemoteSession*>(payload)->expired() ? GIT_EUSER : 0;
}

Result<RemoteHeads> RemoteSession::heads(git_remote* remote) const {
  const git_remote_head** list = nullptr;
  size_t count = 0;
  if (int rc = git_remote_ls(&list, &count, remote); rc < 0) {
    return fail(failure(rc, "git_remote_ls"));
  }
  RemoteHeads out;
  std::map<std::string, RemoteRef> refs;
  std::map<std::string, std::string> peeled;
  for (size_t i = 0; i < count; ++i) {
    const git_remote_head* head = list[i];
    std::string name = head->name;
    if (name == "HEAD") {
      out.head_oid = oidHex(head->oid);
      if (head->symref_target != nullptr) {
        out.default_branch = shortBranch(head->symref_target);
      }
      continue;
    }
    constexpr std::string_view kPeel = "^{}";
    if (name.size() > kPeel.size() && name.compare(name.size() - kPeel.size(), kPeel.size(), kPeel) == 0) {
      peeled[name.substr(0, name.size() - kPeel.size())] = oidHex(head->oid);
      continue;
    }
    refs[name] = RemoteRef{.name = name, .oid = oidHex(head->oid)};
  }
  for (auto& [name, ref] : refs) {
    if (auto it = peeled.find(name); it != peeled.end()) {
      ref.peeled = it->second;
    }
    out.refs.push_back(std::move(ref));
  }
  if (out.default_branch.empty() && !out.head_oid.empty()) {
    // Old servers do not advertise the HEAD symref; libgit2 guesses from the branch HEAD's commit matches.
    git_buf buffer = GIT_BUF_INIT;
    if (git_remote_default_branch(&buffer, remote) == 0) {
      out.default_branch = shortBranch(std::string(buffer.ptr, buffer.size));
    }
    git_buf_dispose(&buffer);
    git_error_clear();
  }
  return out;
}

}  // namespace flotilla::git::detail

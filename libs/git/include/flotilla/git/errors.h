// flotilla/git/errors.h
//
// The one place where libgit2 failures become flotilla::Error. It works on plain values (libgit2's return code,
// error class and message, plus what our own callbacks observed) so the rules can be unit-tested without a
// server. The kind tells the poller what to do: kTransient (network down, timeout, 5xx) -> retry with backoff;
// kPermanent (authentication or certificate/host key rejected) -> report and wait for a config change;
// kNotFound (ref, path or repository missing); kInvalid (bad URL, ref name, path or config).
#pragma once

#include <string>

#include "flotilla/core/result.h"

namespace flotilla::git {

//! What our remote callbacks decided; it explains a failure better than libgit2's generic codes.
enum class CallbackVerdict {
  kNone,
  kAuthRejected,         //!< the server refused the credentials we gave
  kNoCredentials,        //!< the server asked for credentials and none (of the right kind) are configured
  kCertificateRejected,  //!< HTTPS certificate not trusted or not for this host
  kHostKeyRejected,      //!< SSH host key unknown, changed or revoked
  kTimedOut,             //!< the operation ran past its deadline
};

//! A libgit2 failure described without libgit2 types.
struct GitFailure {
  int code = -1;         //!< libgit2 return code (GIT_EAUTH, GIT_ENOTFOUND, ...)
  int error_class = 0;   //!< git_error_t of git_error_last() (GIT_ERROR_NET, GIT_ERROR_HTTP, ...)
  std::string message;   //!< git_error_last()->message
  std::string function;  //!< the libgit2 function that failed; becomes Error::where
  std::string url;       //!< redacted remote URL for network operations, empty for local ones
  bool network = false;  //!< during a remote operation: unknown failures count as transient, not internal
  CallbackVerdict verdict = CallbackVerdict::kNone;
  std::string detail;  //!< the callback's explanation (never a secret)
};

//! Maps a failure to an Error (see the header comment for the kinds). The message names the URL for network
//! failures; callers scrub secrets afterwards (libgit2 messages do not contain them, but be safe).
Error toError(const GitFailure& failure);

}  // namespace flotilla::git

#include "flotilla/git/errors.h"

#include <algorithm>
#include <cctype>

#include <git2/errors.h>

#include "flotilla/core/ascii.h"

namespace flotilla::git {
namespace {

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

Error toError(const GitFailure& failure) {
  const std::string& where = failure.function;
  const std::string target = failure.url.empty() ? "" : " " + failure.url;
  std::string message = failure.message.empty() ? "libgit2 error " + std::to_string(failure.code) : failure.message;
  auto explained = [&](const std::string& head) {
    return head + ": " + (failure.detail.empty() ? message : failure.detail);
  };

  switch (failure.verdict) {
    case CallbackVerdict::kAuthRejected:
      return makeError(ErrorKind::kPermanent, explained("authentication failed for" + target), where);
    case CallbackVerdict::kNoCredentials:
      return makeError(ErrorKind::kPermanent, explained("authentication required for" + target), where);
    case CallbackVerdict::kCertificateRejected:
      return makeError(ErrorKind::kPermanent, explained("TLS certificate of" + target + " rejected"), where);
    case CallbackVerdict::kHostKeyRejected:
      return makeError(ErrorKind::kPermanent, explained("SSH host key of" + target + " rejected"), where);
    case CallbackVerdict::kTimedOut:
      return makeError(ErrorKind::kTransient, explained("timed out talking to" + target), where);
    case CallbackVerdict::kNone:
      break;
  }

  const std::string lower = toLowerAscii(message);
  const bool http = failure.error_class == GIT_ERROR_HTTP;

  if (failure.code == GIT_EAUTH || (http && contains(lower, "401"))) {
    return makeError(ErrorKind::kPermanent, "authentication failed for" + target + ": " + message, where);
  }
  if (failure.code == GIT_ECERTIFICATE || (failure.error_class == GIT_ERROR_SSL && contains(lower, "certificate"))) {
    return makeError(ErrorKind::kPermanent, "TLS certificate of" + target + " rejected: " + message, where);
  }
  if (http && contains(lower, "403")) {
    return makeError(ErrorKind::kPermanent, "access denied to" + target + ": " + message, where);
  }
  if (failure.network && ((http && contains(lower, "404")) || contains(lower, "repository not found") ||
                          contains(lower, "does not appear to be a git repository") ||
                          contains(lower, "no such repository") || contains(lower, "not exported"))) {
    return makeError(ErrorKind::kNotFound, "repository not found at" + target + ": " + message, where);
  }
  if (failure.code == GIT_ENOTFOUND) {
    return makeError(ErrorKind::kNotFound, failure.url.empty() ? message : failure.url + ": " + message, where);
  }
  if (failure.code == GIT_EINVALIDSPEC || failure.code == GIT_EAMBIGUOUS || failure.error_class == GIT_ERROR_INVALID) {
    return makeError(ErrorKind::kInvalid, failure.url.empty() ? message : failure.url + ": " + message, where);
  }
  if (failure.network) {
    // Connection refused or reset, DNS, TLS handshake, 5xx, unexpected EOF: the next poll may succeed.
    return makeError(ErrorKind::kTransient, "cannot fetch from" + target + ": " + message, where);
  }
  return makeError(ErrorKind::kInternal, message, where);
}

}  // namespace flotilla::git

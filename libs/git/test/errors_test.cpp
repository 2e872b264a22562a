#include "flotilla/git/errors.h"

#include <git2/errors.h>
#include <gtest/gtest.h>

namespace flotilla::git {
namespace {

GitFailure network(int code, int error_class, std::string message) {
  return GitFailure{.code = code,
                    .error_class = error_class,
                    .message = std::move(message),
                    .function = "git_remote_connect",
                    .url = "https://git.example.com/app.git",
                    .network = true};
}

struct Case {
  const char* name;
  GitFailure failure;
  ErrorKind kind;
  const char* says;
};

// The table the poller relies on: what each libgit2 failure means for retrying.
TEST(GitErrorsTest, MapsLibgit2FailuresToKinds) {
  const Case cases[] = {
      {"connection refused", network(-1, GIT_ERROR_OS, "failed to connect to 127.0.0.1: Connection refused"),
       ErrorKind::kTransient, "Connection refused"},
      {"dns", network(-1, GIT_ERROR_NET, "failed to resolve address for x: Name or service not known"),
       ErrorKind::kTransient, "resolve"},
      {"server error", network(-1, GIT_ERROR_HTTP, "unexpected http status code: 502"), ErrorKind::kTransient, "502"},
      {"eof", network(GIT_EEOF, GIT_ERROR_NET, "early EOF"), ErrorKind::kTransient, "early EOF"},
      {"auth code", network(GIT_EAUTH, GIT_ERROR_HTTP, "too many redirects or authentication replays"),
       ErrorKind::kPermanent, "authentication failed for https://git.example.com/app.git"},
      {"http 401", network(-1, GIT_ERROR_HTTP, "unexpected http status code: 401"), ErrorKind::kPermanent,
       "authentication failed"},
      {"http 403", network(-1, GIT_ERROR_HTTP, "unexpected http status code: 403"), ErrorKind::kPermanent,
       "access denied"},
      {"certificate", network(GIT_ECERTIFICATE, GIT_ERROR_SSL, "the SSL certificate is invalid"), ErrorKind::kPermanent,
       "TLS certificate"},
      {"mbedtls", network(-1, GIT_ERROR_SSL, "SSL error: x509 - Certificate verification failed"),
       ErrorKind::kPermanent, "TLS certificate"},
      {"http 404", network(-1, GIT_ERROR_HTTP, "unexpected http status code: 404"), ErrorKind::kNotFound,
       "repository not found"},
      {"daemon", network(-1, GIT_ERROR_NET, "remote error: no such repository: /x.git"), ErrorKind::kNotFound,
       "repository not found"},
      {"bad url", network(-1, GIT_ERROR_INVALID, "unsupported URL protocol"), ErrorKind::kInvalid, "unsupported"},
      {"local not found", GitFailure{.code = GIT_ENOTFOUND, .error_class = GIT_ERROR_REFERENCE, .message = "no ref"},
       ErrorKind::kNotFound, "no ref"},
      {"ambiguous", GitFailure{.code = GIT_EAMBIGUOUS, .error_class = GIT_ERROR_ODB, .message = "ambiguous"},
       ErrorKind::kInvalid, "ambiguous"},
      {"local other", GitFailure{.code = -1, .error_class = GIT_ERROR_ODB, .message = "corrupt pack"},
       ErrorKind::kInternal, "corrupt pack"},
  };
  for (const auto& c : cases) {
    Error error = toError(c.failure);
    EXPECT_EQ(error.kind, c.kind) << c.name << ": " << error.describe();
    EXPECT_NE(error.message.find(c.says), std::string::npos) << c.name << ": " << error.message;
    EXPECT_EQ(error.where, c.failure.function) << c.name;
  }
}

// What our callbacks saw wins over libgit2's generic code (e.g. a rejected host key comes back as -1).
TEST(GitErrorsTest, CallbackVerdictsExplainTheFailure) {
  GitFailure failure = network(-1, GIT_ERROR_NET, "user canceled hostkey check");
  failure.verdict = CallbackVerdict::kHostKeyRejected;
  failure.detail = "the key of [h]:22 does not match known_hosts";
  Error error = toError(failure);
  EXPECT_EQ(error.kind, ErrorKind::kPermanent);
  EXPECT_EQ(error.message,
            "SSH host key of https://git.example.com/app.git rejected: the key of [h]:22 does not match known_hosts");

  failure.verdict = CallbackVerdict::kTimedOut;
  failure.detail = "no result within 100 ms";
  EXPECT_EQ(toError(failure).kind, ErrorKind::kTransient);

  failure.verdict = CallbackVerdict::kAuthRejected;
  EXPECT_EQ(toError(failure).kind, ErrorKind::kPermanent);
  failure.verdict = CallbackVerdict::kNoCredentials;
  EXPECT_NE(toError(failure).message.find("authentication required"), std::string::npos);
  failure.verdict = CallbackVerdict::kCertificateRejected;
  EXPECT_NE(toError(failure).message.find("TLS certificate"), std::string::npos);
}

}  // namespace
}  // namespace flotilla::git

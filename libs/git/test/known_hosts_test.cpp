#include "flotilla/git/known_hosts.h"

#include <gtest/gtest.h>

#include "flotilla/core/util.h"

namespace flotilla::git {
namespace {

// Made with ssh-keygen: an ed25519 key, its fingerprint, and the same key hashed (-H) for "[git.example.com]:2222".
constexpr const char* kEd25519 = "AAAAC3NzaC1lZDI1NTE5AAAAIKMriN9NdH+jdCwrLVJMr2xh8MT5twFH6Msjr/vi+3Ki";
constexpr const char* kEd25519Fingerprint = "SHA256:k0lob20pCsQ201GeQ1GZp7/lgw8pGsLN7k/FhAIw4Ls";
constexpr const char* kHashedLine =
    "|1|N48Y6m31Guh8K3tqJuDVdC2rfPg=|yOHmGE0FvvXnlP/r0dgk8bQ9/CU= ssh-ed25519 "
    "AAAAC3NzaC1lZDI1NTE5AAAAIKMriN9NdH+jdCwrLVJMr2xh8MT5twFH6Msjr/vi+3Ki";
constexpr const char* kEcdsa =
    "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBHdrAmMiAWUMxQG2F3EFMoAsc7WOARfGMIb0ln0eWTXewecb6F9nmda9ieXH"
    "le9HJqSP/kQbaigo/maQ5Rc1qVU=";

std::string blob(const char* base64) {
  return base64Decode(base64).value();
}

std::vector<KnownHost> parse(const std::string& text) {
  auto parsed = parseKnownHosts(text);
  EXPECT_TRUE(parsed.ok()) << parsed.error().describe();
  return parsed.ok() ? *parsed : std::vector<KnownHost>{};
}

// Plain, multi-pattern and marked lines; comments and blank lines are skipped.
TEST(KnownHostsTest, ParsesPlainLinesMarkersAndComments) {
  auto entries = parse(std::string("# comment\n\n") + "github.com,140.82.112.3 ssh-ed25519 " + kEd25519 +
                       " a comment\r\n" + "@revoked * ecdsa-sha2-nistp256 " + kEcdsa + "\n" + kHashedLine + "\n");
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].patterns, (std::vector<std::string>{"github.com", "140.82.112.3"}));
  EXPECT_EQ(entries[0].key_type, "ssh-ed25519");
  EXPECT_EQ(entries[0].key_blob, blob(kEd25519));
  EXPECT_EQ(entries[0].line, 3);
  EXPECT_EQ(entries[1].marker, "@revoked");
  EXPECT_FALSE(entries[2].hashed_host.empty());
  EXPECT_TRUE(entries[2].patterns.empty());
}

// Malformed lines are rejected with their line number.
TEST(KnownHostsTest, RejectsMalformedLines) {
  for (const std::string& text : {std::string("host ssh-ed25519\n"), std::string("host ssh-ed25519 !!!notbase64\n"),
                                  std::string("host ssh-rsa ") + kEd25519 + "\n",  // type does not match the key
                                  std::string("@bogus host ssh-ed25519 ") + kEd25519 + "\n",
                                  std::string("|1|bad ssh-ed25519 ") + kEd25519 + "\n"}) {
    auto parsed = parseKnownHosts("# first\n" + text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.error().kind, ErrorKind::kInvalid);
    EXPECT_NE(parsed.error().message.find("line 2"), std::string::npos) << parsed.error().message;
  }
}

// Host name forms: "host" for port 22, "[host]:port" otherwise; wildcards, negation, case, hashed entries.
TEST(KnownHostsTest, MatchesHostPatterns) {
  auto entries = parse(std::string("git.example.com,[10.0.0.1]:2222 ssh-ed25519 ") + kEd25519 + "\n" +
                       "*.corp.example,!bad.corp.example ssh-ed25519 " + kEd25519 + "\n" +
                       "git?.example.org ssh-ed25519 " + kEd25519 + "\n" + kHashedLine + "\n");
  EXPECT_TRUE(knownHostMatches(entries[0], "git.example.com"));
  EXPECT_TRUE(knownHostMatches(entries[0], "GIT.example.com"));
  EXPECT_FALSE(knownHostMatches(entries[0], "[git.example.com]:2222")) << "a plain entry is for port 22 only";
  EXPECT_TRUE(knownHostMatches(entries[0], "[10.0.0.1]:2222"));
  EXPECT_FALSE(knownHostMatches(entries[0], "10.0.0.1"));
  EXPECT_TRUE(knownHostMatches(entries[1], "git.corp.example"));
  EXPECT_FALSE(knownHostMatches(entries[1], "bad.corp.example"));
  EXPECT_FALSE(knownHostMatches(entries[1], "corp.example"));
  EXPECT_TRUE(knownHostMatches(entries[2], "git1.example.org"));
  EXPECT_FALSE(knownHostMatches(entries[2], "git12.example.org"));
  EXPECT_TRUE(knownHostMatches(entries[3], "[git.example.com]:2222"));
  EXPECT_FALSE(knownHostMatches(entries[3], "git.example.com"));
}

// Verdicts: the right key matches (by blob or by SHA-256), another key for a known host is a mismatch,
// an unnamed host is unknown, a revoked key is refused even if also listed as valid.
TEST(KnownHostsTest, ChecksPresentedKeys) {
  auto entries = parse(std::string("[git.example.com]:2222 ssh-ed25519 ") + kEd25519 + "\n");
  EXPECT_EQ(checkHostKey(entries, "[git.example.com]:2222", blob(kEd25519)), HostKeyVerdict::kMatch);
  EXPECT_EQ(checkHostKey(entries, "[git.example.com]:2222", {}, sha256Raw(blob(kEd25519))), HostKeyVerdict::kMatch);
  EXPECT_EQ(checkHostKey(entries, "[git.example.com]:2222", blob(kEcdsa)), HostKeyVerdict::kMismatch);
  EXPECT_EQ(checkHostKey(entries, "git.example.com", blob(kEd25519)), HostKeyVerdict::kUnknownHost);
  EXPECT_EQ(checkHostKey(entries, "[git.example.com]:2222", {}, {}), HostKeyVerdict::kMismatch);
  EXPECT_EQ(checkHostKey({}, "git.example.com", blob(kEd25519)), HostKeyVerdict::kUnknownHost);

  auto revoked = parse(std::string("[git.example.com]:2222 ssh-ed25519 ") + kEd25519 + "\n@revoked * ssh-ed25519 " +
                       kEd25519 + "\n");
  EXPECT_EQ(checkHostKey(revoked, "[git.example.com]:2222", blob(kEd25519)), HostKeyVerdict::kRevoked);

  // A host with two keys (e.g. during rotation) accepts either.
  auto rotating = parse(std::string("host ssh-ed25519 ") + kEd25519 + "\nhost ecdsa-sha2-nistp256 " + kEcdsa + "\n");
  EXPECT_EQ(checkHostKey(rotating, "host", blob(kEcdsa)), HostKeyVerdict::kMatch);
  EXPECT_EQ(checkHostKey(rotating, "host", blob(kEd25519)), HostKeyVerdict::kMatch);
}

// The fingerprint format matches `ssh-keygen -l`.
TEST(KnownHostsTest, FingerprintMatchesSshKeygen) {
  EXPECT_EQ(hostKeyFingerprint(blob(kEd25519)), kEd25519Fingerprint);
}

}  // namespace
}  // namespace flotilla::git

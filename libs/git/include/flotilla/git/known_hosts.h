// flotilla/git/known_hosts.h
//
// OpenSSH known_hosts parsing and host-key checks. libgit2 1.5 leaves host-key trust entirely to the
// certificate_check callback, so this is where an SSH server is authenticated: the key the server presents must
// equal a known_hosts key for "host" (port 22) or "[host]:port".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/result.h"

namespace flotilla::git {

//! One known_hosts line.
struct KnownHost {
  std::string marker;                 //!< "", "@revoked" or "@cert-authority"
  std::vector<std::string> patterns;  //!< host patterns ("*", "?" and "!negation" allowed); empty when hashed
  std::string hashed_salt;            //!< raw salt of a "|1|salt|hash" entry
  std::string hashed_host;            //!< raw HMAC-SHA1 of a "|1|salt|hash" entry
  std::string key_type;               //!< "ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", ...
  std::string key_blob;               //!< the decoded key (SSH wire format), what the server presents
  int line = 0;                       //!< 1-based line number in the text
};

//! Parses known_hosts text; blank lines and '#' comments are skipped. kInvalid (with the line number) for a
//! line that has no key or whose key is not base64.
Result<std::vector<KnownHost>> parseKnownHosts(std::string_view text);

//! Whether `entry` names `host_name` ("host" or "[host]:port", see GitUrl::knownHostsName()).
bool knownHostMatches(const KnownHost& entry, std::string_view host_name);

enum class HostKeyVerdict {
  kMatch,        //!< a plain entry for this host carries this key
  kMismatch,     //!< the host is known with other keys: possible man-in-the-middle
  kUnknownHost,  //!< no entry names this host
  kRevoked,      //!< a @revoked entry carries this key
};

//! Checks the key a server presented: `key_blob` (raw SSH key) when available, else its SHA-256 digest
//! `key_sha256` (32 raw bytes). @cert-authority entries are ignored (host certificates are not supported).
HostKeyVerdict checkHostKey(const std::vector<KnownHost>& entries, std::string_view host_name,
                            std::string_view key_blob, std::string_view key_sha256 = {});

//! "SHA256:<base64 without padding>" like ssh-keygen -l, for messages.
std::string hostKeyFingerprint(std::string_view key_blob);

}  // namespace flotilla::git

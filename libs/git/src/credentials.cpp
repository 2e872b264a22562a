#include "flotilla/git/credentials.h"

namespace flotilla::git {

std::vector<std::string> Credentials::secrets() const {
  std::vector<std::string> out;
  for (const std::string* value : {&password, &token, &ssh_private_key, &ssh_passphrase}) {
    if (!value->empty()) {
      out.push_back(*value);
    }
  }
  return out;
}

std::string scrubSecrets(std::string text, const std::vector<std::string>& secrets) {
  for (const auto& secret : secrets) {
    if (secret.empty()) {
      continue;
    }
    for (auto pos = text.find(secret); pos != std::string::npos; pos = text.find(secret, pos)) {
      text.replace(pos, secret.size(), "[REDACTED]");
      pos += 10;
    }
  }
  return text;
}

}  // namespace flotilla::git

// A signed generic-provider push to the poller's webhook listener, as a git server would send it (the benchmarks'
// webhook rounds). Not a test helper of the poller: its own tests drive the listener through libs/http.
#pragma once

#include <cstdlib>
#include <string>

#include <sys/socket.h>
#include <unistd.h>

#include "flotilla/core/json.h"
#include "flotilla/harness/local_port.h"
#include "flotilla/poller/webhook.h"

namespace flotilla::bench {

//! POSTs `body` to 127.0.0.1:port/webhook over a fresh connection, signed with `secret` (X-Flotilla-Signature,
//! the generic provider); returns the HTTP status (0 on failure).
inline int postWebhook(int port, const std::string& body, const std::string& secret) {
  const int fd = harness::connectLocal(port);
  if (fd < 0) {
    return 0;
  }
  const std::string request =
      "POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "X-Flotilla-Signature: sha256=" +
      poller::hmacSha256Hex(secret, body) + "\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n\r\n" + body;
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  char buffer[512];
  const ssize_t n = ::recv(fd, buffer, sizeof(buffer) - 1, 0);
  ::close(fd);
  if (n < 12) {
    return 0;
  }
  return std::atoi(std::string(buffer + 9, 3).c_str());
}

//! The generic provider's push body: the repository, the ref and the commit it now points at.
inline std::string pushBody(const std::string& repo_url, const std::string& commit) {
  return Json::obj({{"repo", repo_url}, {"ref", "refs/heads/main"}, {"commit", commit}}).dump();
}

}  // namespace flotilla::bench

#include "flotilla/harness/local_port.h"

#include <cerrno>
#include <cstring>
#include <string>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace flotilla::harness {

namespace {

sockaddr_in loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

}  // namespace

Result<int> freeTcpPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return fail(ErrorKind::kTransient, std::string("socket: ") + std::strerror(errno), "freeTcpPort");
  }
  sockaddr_in addr = loopback(0);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    return fail(ErrorKind::kTransient, std::string("bind 127.0.0.1:0: ") + std::strerror(err), "freeTcpPort");
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

int connectLocal(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return -1;
  }
  sockaddr_in addr = loopback(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool acceptsLocalConnections(int port) {
  int fd = connectLocal(port);
  if (fd < 0) {
    return false;
  }
  ::close(fd);
  return true;
}

}  // namespace flotilla::harness

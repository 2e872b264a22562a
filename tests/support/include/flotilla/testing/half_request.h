// flotilla/testing/half_request.h: a client that starts an HTTP request and never finishes it.
#pragma once

#include <cstdint>
#include <string>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace flotilla::testing {

//! A TCP connection to 127.0.0.1:`port` that sends `head` (a request line and headers without the blank line that
//! ends them, so the request never ends) and stays open until destroyed.
class HalfRequest {
 public:
  HalfRequest(uint16_t port, const std::string& head) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                 ::send(fd_, head.data(), head.size(), 0) == static_cast<ssize_t>(head.size());
  }
  ~HalfRequest() { ::close(fd_); }
  HalfRequest(const HalfRequest&) = delete;
  HalfRequest& operator=(const HalfRequest&) = delete;

  //! Connected and the head sent.
  [[nodiscard]] bool connected() const { return connected_; }

 private:
  int fd_;
  bool connected_ = false;
};

}  // namespace flotilla::testing

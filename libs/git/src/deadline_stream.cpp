#include "deadline_stream.h"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>

#include <fcntl.h>
#include <git2.h>
#include <git2/sys/stream.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "flotilla/core/errno_text.h"
#include "flotilla/core/log.h"

namespace flotilla::git::detail {
namespace {

using Clock = std::chrono::steady_clock;

thread_local std::shared_ptr<DeadlineState> t_deadline;

//! Shuts sockets down when their operation's deadline passes. One thread for the process, started on first use
//! and never stopped (it only waits while nothing is watched); the instance is never destroyed, so a stream
//! closed during static destruction still finds it.
class Watchdog {
 public:
  static Watchdog& instance() {
    static auto* watchdog = new Watchdog();  // never deleted: lives until exit
    return *watchdog;
  }

  uint64_t watch(int fd, std::shared_ptr<DeadlineState> state, std::string peer) {
    std::lock_guard lock(mutex_);
    const uint64_t id = next_id_++;
    entries_.emplace(id, Entry{fd, std::move(state), std::move(peer)});
    changed_.notify_one();
    return id;
  }

  //! After this returns the watchdog no longer touches the descriptor, so the caller may close it.
  void unwatch(uint64_t id) {
    std::lock_guard lock(mutex_);
    entries_.erase(id);
  }

 private:
  struct Entry {
    int fd;
    std::shared_ptr<DeadlineState> state;
    std::string peer;
  };

  Watchdog() {
    std::thread([this] { loop(); }).detach();
  }

  [[noreturn]] void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      auto earliest = Clock::time_point::max();
      for (const auto& [id, entry] : entries_) {
        earliest = std::min(earliest, entry.state->deadline);
      }
      if (earliest == Clock::time_point::max()) {
        changed_.wait(lock);
      } else {
        changed_.wait_until(lock, earliest);
      }
      cutExpired(Clock::now());
    }
  }

  void cutExpired(Clock::time_point now) {
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second.state->deadline > now) {
        ++it;
        continue;
      }
      // Wakes a read or write blocked on the socket (ours, or libssh2's on the same descriptor).
      ::shutdown(it->second.fd, SHUT_RDWR);
      it->second.state->cut = true;
      log::warn("git server did not answer before the operation's deadline; closing the connection",
                {{"peer", it->second.peer}});
      it = entries_.erase(it);
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<uint64_t, Entry> entries_;
  uint64_t next_id_ = 1;
};

struct StreamExtra {
  std::string host;
  std::string port;
  std::shared_ptr<DeadlineState> deadline;  //!< null: the operation has no deadline
  uint64_t watch_id = 0;
};

// The layout of libgit2's git_socket_stream ({parent, host, port, s}): its SSH transport reads the descriptor
// of a GIT_STREAM_STANDARD stream through that struct (streams/socket.h, unchanged from 1.1 to 1.9), so ours
// starts with the same members. A plain struct, standard layout, so the cast is sound.
struct DeadlineStream {
  git_stream parent;
  char* host;
  char* port;
  int s;
  StreamExtra* extra;
};

DeadlineStream* self(git_stream* stream) {
  return reinterpret_cast<DeadlineStream*>(stream);  // `parent` is the first member
}

int netError(const std::string& message) {
  git_error_set_str(GIT_ERROR_NET, message.c_str());
  return -1;
}

//! Milliseconds left until `deadline` for poll(): -1 without one, 0 when it has passed.
int remainingMs(const std::shared_ptr<DeadlineState>& deadline) {
  if (!deadline) {
    return -1;
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline->deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
}

//! connect() bounded by the deadline: non-blocking, then poll for the result.
int connectWithin(int fd, const addrinfo& address, const std::shared_ptr<DeadlineState>& deadline) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int rc = ::connect(fd, address.ai_addr, address.ai_addrlen);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd waiting{.fd = fd, .events = POLLOUT, .revents = 0};
    do {
      rc = ::poll(&waiting, 1, remainingMs(deadline));
    } while (rc < 0 && errno == EINTR);
    if (rc == 0) {
      errno = ETIMEDOUT;
      if (deadline) {
        deadline->cut = true;
      }
      rc = -1;
    } else if (rc > 0) {
      int error = 0;
      socklen_t length = sizeof error;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
      errno = error;
      rc = error == 0 ? 0 : -1;
    }
  }
  ::fcntl(fd, F_SETFL, flags);
  return rc;
}

int streamClose(git_stream* stream);

int streamConnect(git_stream* stream) {
  streamClose(stream);  // a reconnect on the same stream: stop watching the old descriptor first
  DeadlineStream* s = self(stream);
  StreamExtra& extra = *s->extra;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_UNSPEC;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(extra.host.c_str(), extra.port.c_str(), &hints, &found); rc != 0) {
    return netError("failed to resolve address for " + extra.host + ": " + ::gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);
  int last_errno = 0;
  for (const addrinfo* p = addresses.get(); p != nullptr; p = p->ai_next) {
    const int fd = ::socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol);
    if (fd < 0) {
      last_errno = errno;
      continue;
    }
    if (connectWithin(fd, *p, extra.deadline) == 0) {
      s->s = fd;
      if (extra.deadline) {
        extra.watch_id = Watchdog::instance().watch(fd, extra.deadline, extra.host + ":" + extra.port);
      }
      return 0;
    }
    last_errno = errno;
    ::close(fd);
    if (extra.deadline && extra.deadline->cut) {
      break;
    }
  }
  return netError("failed to connect to " + extra.host + ":" + extra.port + ": " + errnoText(last_errno));
}

ssize_t streamRead(git_stream* stream, void* data, size_t length) {
  ssize_t n = -1;
  do {
    n = ::recv(self(stream)->s, data, length, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    return netError(std::string("error receiving data from socket: ") + errnoText(errno));
  }
  return n;
}

ssize_t streamWrite(git_stream* stream, const char* data, size_t length, int /*flags*/) {
  size_t written = 0;
  while (written < length) {
    const ssize_t n = ::send(self(stream)->s, data + written, length - written, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return netError(std::string("error sending data to socket: ") + errnoText(errno));
    }
    written += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(written);
}

int streamClose(git_stream* stream) {
  DeadlineStream* s = self(stream);
  if (s->extra->watch_id != 0) {
    Watchdog::instance().unwatch(s->extra->watch_id);
    s->extra->watch_id = 0;
  }
  if (s->s >= 0) {
    ::close(s->s);
    s->s = -1;
  }
  return 0;
}

void streamFree(git_stream* stream) {
  streamClose(stream);
  DeadlineStream* s = self(stream);
  delete s->extra;  // both allocated by streamInit
  delete s;
}

int streamInit(git_stream** out, const char* host, const char* port) {
  auto* extra = new StreamExtra{host, port != nullptr ? port : "", t_deadline, 0};  // owned by the stream
  auto* s = new DeadlineStream{};                                                   // freed by streamFree
  s->parent.version = GIT_STREAM_VERSION;
  s->parent.connect = streamConnect;
  s->parent.read = streamRead;
  s->parent.write = streamWrite;
  s->parent.close = streamClose;
  s->parent.free = streamFree;
  s->host = extra->host.data();
  s->port = extra->port.data();
  s->s = -1;
  s->extra = extra;
  *out = &s->parent;
  return 0;
}

}  // namespace

NetworkDeadline::NetworkDeadline(std::chrono::steady_clock::time_point deadline)
    : state_(std::make_shared<DeadlineState>()), previous_(t_deadline) {
  state_->deadline = deadline;
  t_deadline = state_;
}

NetworkDeadline::~NetworkDeadline() {
  t_deadline = previous_;
}

int registerDeadlineStream() {
  static_assert(std::is_standard_layout_v<DeadlineStream>);
  git_stream_registration registration{};
  registration.version = GIT_STREAM_VERSION;
  registration.init = streamInit;
  registration.wrap = nullptr;
  return git_stream_register(GIT_STREAM_STANDARD, &registration);
}

}  // namespace flotilla::git::detail

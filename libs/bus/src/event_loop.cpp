// The epoll loop behind ConnectOptions::event_loop, and libnats' four event-loop callbacks for it.
//
// libnats calls attach after every (re)connect, read/write to start or stop polling (under the connection's lock,
// from any thread), and detach once when the connection is closed (without the connection's lock, the connection
// still alive until detach returns). The loop thread handles a batch of ready sockets under `processing`, so a detach
// from another thread waits until no read or write event of that connection is being handled; a detached watch is
// freed only after the batch that may still name it.
#include "flotilla/bus/event_loop.h"

#include <array>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nats/nats.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "event_loop_options.h"
#include "flotilla/core/errno_text.h"
#include "flotilla/core/log.h"

namespace flotilla::bus {

namespace {

//! One connection's socket on the loop.
struct Watch {
  EventLoop::Impl* loop = nullptr;
  natsConnection* nc = nullptr;
  std::mutex mutex;  //!< fd and events (read/write callbacks come from any thread)
  int fd = -1;
  uint32_t events = 0;
  std::atomic<bool> detached{false};
};

constexpr int kBatch = 256;

}  // namespace

struct EventLoop::Impl {
  int epoll_fd = -1;
  int wake_fd = -1;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> attached{0};
  std::recursive_mutex processing;  //!< held while a batch is handled; detach takes it (also from the loop thread)
  std::vector<Watch*> detached;     //!< freed after the batch being handled (processing)
  std::thread thread;

  ~Impl() {
    for (Watch* watch : detached) {
      delete watch;
    }
    if (wake_fd >= 0) {
      ::close(wake_fd);
    }
    if (epoll_fd >= 0) {
      ::close(epoll_fd);
    }
  }

  void run() {
    std::array<epoll_event, kBatch> ready{};
    while (!stopping) {
      const int n = epoll_wait(epoll_fd, ready.data(), kBatch, -1);
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        log::error("event loop: epoll_wait failed; its connections no longer read", {{"error", errnoText(errno)}});
        return;
      }
      std::lock_guard lock(processing);
      for (int i = 0; i < n; ++i) {
        auto* watch = static_cast<Watch*>(ready[i].data.ptr);
        if (watch == nullptr) {  // the wake-up of stop()
          continue;
        }
        const uint32_t events = ready[i].events;
        if (!watch->detached && (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) {
          natsConnection_ProcessReadEvent(watch->nc);
        }
        if (!watch->detached && (events & EPOLLOUT) != 0) {
          natsConnection_ProcessWriteEvent(watch->nc);
        }
      }
      for (Watch* watch : detached) {
        delete watch;
      }
      detached.clear();
    }
  }

  // Requires watch.mutex.
  static natsStatus apply(Watch& watch, int op) {
    epoll_event event{};
    event.events = watch.events;
    event.data.ptr = &watch;
    return epoll_ctl(watch.loop->epoll_fd, op, watch.fd, &event) == 0 ? NATS_OK : NATS_SYS_ERROR;
  }
};

namespace {

natsStatus onAttach(void** user_data, void* loop, natsConnection* nc, natsSock socket) {
  auto* watch = static_cast<Watch*>(*user_data);
  auto* impl = static_cast<EventLoop::Impl*>(loop);
  if (watch == nullptr) {  // the first connect; a reconnect brings the watch it had
    watch = new Watch();
    watch->loop = impl;
    watch->nc = nc;
    *user_data = watch;
    ++impl->attached;
  }
  std::lock_guard lock(watch->mutex);
  watch->fd = static_cast<int>(socket);
  watch->events = EPOLLIN;
  // A reconnect's socket may reuse the number of the closed one (closing it took it off the epoll set).
  natsStatus s = EventLoop::Impl::apply(*watch, EPOLL_CTL_ADD);
  if (s != NATS_OK && errno == EEXIST) {
    s = EventLoop::Impl::apply(*watch, EPOLL_CTL_MOD);
  }
  return s;
}

natsStatus setPolling(void* user_data, uint32_t flag, bool add) {
  auto* watch = static_cast<Watch*>(user_data);
  std::lock_guard lock(watch->mutex);
  if (watch->detached || watch->fd < 0) {
    return NATS_OK;
  }
  const uint32_t events = add ? (watch->events | flag) : (watch->events & ~flag);
  if (events == watch->events) {
    return NATS_OK;
  }
  watch->events = events;
  natsStatus s = EventLoop::Impl::apply(*watch, EPOLL_CTL_MOD);
  if (s != NATS_OK && (errno == EBADF || errno == ENOENT) && !add) {
    return NATS_OK;  // the socket was closed already (a disconnect): nothing is polled any more
  }
  return s;
}

natsStatus onRead(void* user_data, bool add) {
  return setPolling(user_data, EPOLLIN, add);
}

natsStatus onWrite(void* user_data, bool add) {
  return setPolling(user_data, EPOLLOUT, add);
}

natsStatus onDetach(void* user_data) {
  auto* watch = static_cast<Watch*>(user_data);
  EventLoop::Impl& impl = *watch->loop;
  std::lock_guard processing(impl.processing);
  {
    std::lock_guard lock(watch->mutex);
    watch->detached = true;
    if (watch->fd >= 0) {
      epoll_ctl(impl.epoll_fd, EPOLL_CTL_DEL, watch->fd, nullptr);  // fails harmlessly when libnats closed it first
    }
  }
  impl.detached.push_back(watch);
  --impl.attached;
  return NATS_OK;
}

}  // namespace

Result<std::shared_ptr<EventLoop>> EventLoop::start() {
  auto impl = std::make_unique<Impl>();
  impl->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (impl->epoll_fd < 0) {
    return fail(ErrorKind::kInternal, std::string("event loop: epoll_create1: ") + errnoText(errno));
  }
  impl->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl->wake_fd < 0) {
    return fail(ErrorKind::kInternal, std::string("event loop: eventfd: ") + errnoText(errno));
  }
  epoll_event wake{};
  wake.events = EPOLLIN;
  wake.data.ptr = nullptr;
  if (epoll_ctl(impl->epoll_fd, EPOLL_CTL_ADD, impl->wake_fd, &wake) != 0) {
    return fail(ErrorKind::kInternal, std::string("event loop: epoll_ctl: ") + errnoText(errno));
  }
  impl->thread = std::thread([raw = impl.get()] { raw->run(); });
  return std::make_shared<EventLoop>(std::move(impl));
}

EventLoop::EventLoop(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

EventLoop::~EventLoop() {
  impl_->stopping = true;
  const uint64_t one = 1;
  if (::write(impl_->wake_fd, &one, sizeof(one)) < 0) {
    log::warn("event loop: could not wake its thread", {{"error", errnoText(errno)}});
  }
  if (impl_->thread.joinable()) {
    impl_->thread.join();
  }
}

uint64_t EventLoop::attached() const {
  return impl_->attached;
}

Status useEventLoop(natsOptions* options, EventLoop& loop) {
  if (natsOptions_SetEventLoop(options, &loop.impl(), onAttach, onRead, onWrite, onDetach) != NATS_OK ||
      natsOptions_SetSendAsap(options, true) != NATS_OK) {
    return fail(ErrorKind::kInternal, "natsOptions_SetEventLoop failed");
  }
  return {};
}

}  // namespace flotilla::bus

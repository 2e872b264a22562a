// flotilla/bus/event_loop.h
//
// One epoll thread that reads and writes the sockets of many NATS connections (libnats' external event loop,
// natsOptions_SetEventLoop, with send-as-soon-as-possible). Without it libnats gives every connection a reader and a
// flusher thread; a process that holds thousands of connections (the scale benchmark's simulated agents,
// bench/sim_agents.h) then spends its time switching between 20,000 threads and contending on libnats' locks.
// Services hold one or two connections and do not need it.
//
// A connection joins a loop through ConnectOptions::event_loop and keeps the loop alive until it is closed.
// Subscription callbacks still run where ConnectOptions says (their own thread or libnats' shared pool), never on
// the loop thread, so a slow handler does not stall the other connections' sockets.
#pragma once

#include <cstdint>
#include <memory>

#include "flotilla/core/result.h"

namespace flotilla::bus {

class EventLoop {
 public:
  //! Creates the epoll instance and starts its thread.
  static Result<std::shared_ptr<EventLoop>> start();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  //! Connections attached now (attached and not yet closed).
  [[nodiscard]] uint64_t attached() const;

  struct Impl;
  [[nodiscard]] Impl& impl() { return *impl_; }
  explicit EventLoop(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace flotilla::bus

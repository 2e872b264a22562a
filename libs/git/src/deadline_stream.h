// Socket deadlines for libgit2 1.5, which has no server timeouts (GIT_OPT_SET_SERVER_CONNECT_TIMEOUT and
// GIT_OPT_SET_SERVER_TIMEOUT arrived in 1.7). Without them a server that accepts the connection and then stays
// silent blocks the calling thread until the OS gives up (hours): no libgit2 callback runs while it waits.
//
// We register our own GIT_STREAM_STANDARD stream, which libgit2 uses for every TCP connection (http://, git://,
// https:// under its TLS stream, and ssh:// under libssh2). It connects with a deadline, and a watchdog thread
// shuts the socket down when the operation's deadline passes, which wakes any read or write blocked on it — also
// libssh2's, which uses the descriptor directly. The operation then fails, and RemoteSession reports it as timed
// out (kTransient: the next poll may succeed). Private to libs/git.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

namespace flotilla::git::detail {

//! The deadline of one network operation.
struct DeadlineState {
  std::chrono::steady_clock::time_point deadline;
  std::atomic<bool> cut{false};  //!< the watchdog closed a socket of this operation at its deadline
};

//! Makes `deadline` the deadline of every connection libgit2 opens on this thread while it lives (RemoteSession
//! holds one for its operation). Scopes nest: the previous deadline comes back at destruction.
class NetworkDeadline {
 public:
  explicit NetworkDeadline(std::chrono::steady_clock::time_point deadline);
  ~NetworkDeadline();
  NetworkDeadline(const NetworkDeadline&) = delete;
  NetworkDeadline& operator=(const NetworkDeadline&) = delete;

  //! True when a connection of this operation was cut because the deadline passed.
  [[nodiscard]] bool cut() const { return state_->cut.load(); }

 private:
  std::shared_ptr<DeadlineState> state_;
  std::shared_ptr<DeadlineState> previous_;
};

//! Registers the stream with libgit2 (ensureInit calls it once, after git_libgit2_init).
int registerDeadlineStream();

}  // namespace flotilla::git::detail

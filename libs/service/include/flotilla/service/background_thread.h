// flotilla/service/background_thread.h
//
// A thread that runs one loop in the background, sleeps between its rounds, and ends promptly on stop(): what the
// periodic tasks of the services share (the garbage collection passes, the agent's credentials renewal).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace flotilla::service {

class BackgroundThread {
 public:
  BackgroundThread() = default;
  //! Stops the thread.
  ~BackgroundThread();
  BackgroundThread(const BackgroundThread&) = delete;
  BackgroundThread& operator=(const BackgroundThread&) = delete;
  BackgroundThread(BackgroundThread&&) = delete;
  BackgroundThread& operator=(BackgroundThread&&) = delete;

  //! Runs `loop` on a new thread, unless one is running. The loop ends when sleepFor() returns false.
  void start(std::function<void()> loop);
  //! Wakes sleepFor(), makes it return false from now on, and waits for the loop to end. Idempotent.
  void stop();
  //! Ends the current (or next) sleepFor() early.
  void wake();
  //! Sleeps up to `duration`, or until wake() or stop(); false when stopping. Callable from any thread, also
  //! before start().
  bool sleepFor(std::chrono::milliseconds duration);
  [[nodiscard]] bool stopping() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool woken_ = false;
  std::thread thread_;
};

}  // namespace flotilla::service

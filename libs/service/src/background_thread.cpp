#include "flotilla/service/background_thread.h"

#include <utility>

namespace flotilla::service {

BackgroundThread::~BackgroundThread() {
  stop();
}

void BackgroundThread::start(std::function<void()> loop) {
  if (thread_.joinable()) {
    return;
  }
  {
    std::lock_guard lock(mutex_);
    stopping_ = false;
  }
  thread_ = std::thread(std::move(loop));
}

void BackgroundThread::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void BackgroundThread::wake() {
  {
    std::lock_guard lock(mutex_);
    woken_ = true;
  }
  wake_.notify_all();
}

bool BackgroundThread::sleepFor(std::chrono::milliseconds duration) {
  std::unique_lock lock(mutex_);
  wake_.wait_for(lock, duration, [this] { return stopping_ || woken_; });
  woken_ = false;
  return !stopping_;
}

bool BackgroundThread::stopping() const {
  std::lock_guard lock(mutex_);
  return stopping_;
}

}  // namespace flotilla::service

// The gateway's bound on API server writes (write_limiter.h).
#include "flotilla/gateway/write_limiter.h"

#include <algorithm>

namespace flotilla::gateway {

TokenBucket::TokenBucket(double rate, double burst, Clock::time_point now)
    : rate_(rate), burst_(std::max(1.0, burst)), tokens_(std::max(1.0, burst)), last_(now) {}

void TokenBucket::refill(Clock::time_point now) {
  if (now > last_) {
    tokens_ = std::min(burst_, tokens_ + rate_ * std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }
}

TokenBucket::Clock::duration TokenBucket::waitFrom(Clock::time_point now) {
  refill(now);
  if (tokens_ >= 1.0) {
    return Clock::duration::zero();
  }
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>((1.0 - tokens_) / rate_));
}

void TokenBucket::take() {
  tokens_ -= 1.0;
}

bool CoalescingQueue::push(const std::string& key) {
  {
    std::lock_guard lock(mutex_);
    if (closed_ || !waiting_.insert(key).second) {
      return false;
    }
    order_.push_back(key);
  }
  wake_.notify_one();
  return true;
}

std::optional<std::string> CoalescingQueue::pop(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!wake_.wait_for(lock, timeout, [&] { return closed_ || !order_.empty(); }) || closed_) {
    return std::nullopt;
  }
  std::string key = std::move(order_.front());
  order_.pop_front();
  waiting_.erase(key);
  return key;
}

void CoalescingQueue::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  wake_.notify_all();
}

size_t CoalescingQueue::size() const {
  std::lock_guard lock(mutex_);
  return order_.size();
}

RetrySchedule::RetrySchedule(Clock::duration base, Clock::duration max) : base_(base), max_(std::max(base, max)) {}

RetrySchedule::Clock::duration RetrySchedule::failed(const std::string& key, Clock::time_point now) {
  auto entry = backoff_.try_emplace(key, base_).first;
  const Clock::duration wait = entry->second;
  entry->second = std::min(max_, wait * 2);
  due_at_[key] = now + wait;
  return wait;
}

void RetrySchedule::succeeded(const std::string& key) {
  backoff_.erase(key);
}

std::vector<std::string> RetrySchedule::due(Clock::time_point now) {
  std::vector<std::string> out;
  for (auto it = due_at_.begin(); it != due_at_.end();) {
    if (it->second <= now) {
      out.push_back(it->first);
      it = due_at_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::optional<RetrySchedule::Clock::duration> RetrySchedule::untilNext(Clock::time_point now) const {
  std::optional<Clock::duration> out;
  for (const auto& [key, at] : due_at_) {
    const Clock::duration wait = at > now ? at - now : Clock::duration::zero();
    out = out ? std::min(*out, wait) : wait;
  }
  return out;
}

}  // namespace flotilla::gateway

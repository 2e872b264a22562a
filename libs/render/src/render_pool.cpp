#include "flotilla/render/render_pool.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace flotilla::render {
namespace {

Result<RenderedBundle> guardedRender(const std::function<Result<RenderedBundle>(size_t)>& render, size_t index) {
  try {
    return render(index);
  } catch (const std::exception& e) {
    return fail(ErrorKind::kInternal, std::string("rendering threw: ") + e.what(), "render");
  } catch (...) {
    return fail(ErrorKind::kInternal, "rendering threw a non-standard exception", "render");
  }
}

}  // namespace

Status renderInOrder(size_t count, const RenderPoolOptions& options,
                     const std::function<Result<RenderedBundle>(size_t)>& render,
                     const std::function<Status(size_t, Result<RenderedBundle>&)>& consume,
                     const std::function<void()>& idle) {
  const size_t threads = std::min(count, static_cast<size_t>(std::max(options.parallelism, 1)));
  if (threads <= 1) {
    for (size_t i = 0; i < count; ++i) {
      idle();
      auto result = guardedRender(render, i);
      FLOTILLA_TRY(consume(i, result));
    }
    return {};
  }
  const size_t window = options.window > 0 ? options.window : 2 * threads;

  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::optional<Result<RenderedBundle>>> results(count);
  size_t next = 0;      // the next item a worker takes
  size_t consumed = 0;  // items handed to consume
  bool stop = false;

  auto work = [&] {
    for (;;) {
      size_t index = 0;
      {
        std::unique_lock lock(mutex);
        cv.wait(lock, [&] { return stop || next >= count || next < consumed + window; });
        if (stop || next >= count) {
          return;
        }
        index = next++;
      }
      auto result = guardedRender(render, index);
      {
        std::lock_guard lock(mutex);
        results[index].emplace(std::move(result));
      }
      cv.notify_all();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (size_t t = 0; t < threads; ++t) {
    pool.emplace_back(work);
  }
  auto finish = [&] {
    {
      std::lock_guard lock(mutex);
      stop = true;
    }
    cv.notify_all();
    for (auto& thread : pool) {
      thread.join();
    }
  };

  Status status;
  for (size_t i = 0; i < count && status.ok(); ++i) {
    std::optional<Result<RenderedBundle>> result;
    {
      std::unique_lock lock(mutex);
      while (!results[i].has_value()) {
        if (!cv.wait_for(lock, options.idle_interval, [&] { return results[i].has_value(); })) {
          lock.unlock();
          idle();
          lock.lock();
        }
      }
      result = std::move(results[i]);
      results[i].reset();
      consumed = i + 1;
    }
    cv.notify_all();
    idle();
    status = consume(i, *result);
  }
  finish();
  return status;
}

}  // namespace flotilla::render

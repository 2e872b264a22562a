// flotilla/render/render_pool.h
//
// Renders the bundles of one commit with bounded parallelism while keeping everything observable in order:
// `render(i)` runs on up to `parallelism` threads, `consume(i, result)` runs on the calling thread strictly in
// index order (0, 1, 2, ...), so stores, records and events of a commit come out in discovery order whatever
// the thread timing. Workers run at most `window` items ahead of the consumer, which bounds the rendered
// manifests held in memory (a commit of 200 bundles of 50 MiB each must not be held at once).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>

#include "flotilla/core/result.h"
#include "flotilla/render/render_bundle.h"

namespace flotilla::render {

struct RenderPoolOptions {
  int parallelism = 1;  //!< threads rendering at the same time (1 = everything on the calling thread)
  size_t window = 0;    //!< results rendered ahead of the consumer; 0 = 2 * parallelism
  std::chrono::milliseconds idle_interval{1000};  //!< how often `idle` runs while the consumer waits
};

//! Renders items [0, count) and hands each result to `consume` in index order. A failed `consume` stops the
//! pool (items not started are skipped, started ones are awaited) and its error is returned. `idle` runs on
//! the calling thread at least every `idle_interval` while it waits (the handler's in-progress heartbeat).
//! An exception thrown by `render` becomes a kInternal error result for that item.
Status renderInOrder(size_t count, const RenderPoolOptions& options,
                     const std::function<Result<RenderedBundle>(size_t)>& render,
                     const std::function<Status(size_t, Result<RenderedBundle>&)>& consume,
                     const std::function<void()>& idle);

}  // namespace flotilla::render

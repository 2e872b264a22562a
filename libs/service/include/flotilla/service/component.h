// flotilla/service/component.h
//
// The lifecycle every long-running part of a service shares (the agent, bundler, poller and scheduler, the
// scheduler's registrar and manifest server): built without contacting anything, started once by main, asked by
// /readyz whether it is ready (Runtime::addReadinessCheck), stopped once at shutdown.
#pragma once

#include <string>

#include "flotilla/core/result.h"

namespace flotilla::service {

class Component {
 public:
  Component() = default;
  //! A component's own destructor calls stop(): its threads and subscriptions point back at it.
  virtual ~Component() = default;
  // Not copyable nor movable, for the same reason.
  Component(const Component&) = delete;
  Component& operator=(const Component&) = delete;
  Component(Component&&) = delete;
  Component& operator=(Component&&) = delete;

  //! Starts the threads and subscriptions (what that takes is the component's to say).
  virtual Status start() = 0;
  //! Stops them and waits for them. Idempotent.
  virtual void stop() = 0;
  //! For /readyz: true when ready, else false with `why` saying what it waits for.
  virtual bool ready(std::string& why) const = 0;
};

}  // namespace flotilla::service

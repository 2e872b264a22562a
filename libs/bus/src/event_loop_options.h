// Private: what connection.cpp needs of event_loop.cpp.
#pragma once

#include <nats/nats.h>

#include "flotilla/bus/event_loop.h"

namespace flotilla::bus {

//! Makes connections from `options` read and write on `loop`'s thread, and send as soon as they publish (libnats then
//! starts no reader and no flusher thread for them).
Status useEventLoop(natsOptions* options, EventLoop& loop);

}  // namespace flotilla::bus

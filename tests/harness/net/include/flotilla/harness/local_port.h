// flotilla/harness/local_port.h
//
// Loopback TCP helpers shared by the harness servers and the tests that talk to them.
#pragma once

#include "flotilla/core/result.h"

namespace flotilla::harness {

//! A free TCP port on 127.0.0.1 (bind to port 0, read it back, close). Another process may take it before the
//! caller binds; callers retry on "address in use".
Result<int> freeTcpPort();

//! A connected (close-on-exec) socket to 127.0.0.1:port, or -1; the caller closes it.
int connectLocal(int port);

//! Whether something accepts TCP connections on 127.0.0.1:port right now.
bool acceptsLocalConnections(int port);

}  // namespace flotilla::harness

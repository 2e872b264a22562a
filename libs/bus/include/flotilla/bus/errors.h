// flotilla/bus/errors.h
//
// The one place where libnats failures become flotilla::Error. A libnats call returns a natsStatus; JetStream
// API calls add a jsErrCode; the library keeps a per-thread text of the last error. All three go into the
// Error, with the libnats function name in Error::where. The ErrorKind decides what callers do next:
// kTransient (timeouts, no server, connection closed) -> retry later; kNotFound; kConflict (optimistic
// concurrency: wrong last sequence, KV revision mismatch, create on an existing key); kInvalid (bad argument
// or configuration); kPermanent (auth, permissions, TLS); kInternal (everything unexpected).
//
// The values are plain ints so this header does not pull in nats.h; pass natsStatus / jsErrCode values.
#pragma once

#include <string_view>

#include "flotilla/core/result.h"

namespace flotilla::bus {

//! The ErrorKind for a libnats status, JetStream error code (0 if none) and error text (may be empty).
ErrorKind classifyNatsError(int status, int js_code, std::string_view text);

//! Builds the Error for a failed libnats call: "<status text>: <detail> (jetstream error <code>)", kind from
//! classifyNatsError, where = `where` (the libnats function, e.g. "js_AddStream").
Error natsError(int status, std::string_view where, int js_code = 0, std::string_view detail = {});

//! Same, reading the detail text from libnats' per-thread last-error (call it on the thread that made the
//! failing call, right after it).
Error lastNatsError(int status, std::string_view where, int js_code = 0);

}  // namespace flotilla::bus

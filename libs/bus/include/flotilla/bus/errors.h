// flotilla/bus/errors.h
//
// The one place where libnats failures become flotilla::Error. A libnats call returns a natsStatus; JetStream
// API calls add a jsErrCode; the library keeps a per-thread text of the last error. All three go into the
// Error, with the libnats function name in Error::where. The ErrorKind decides what callers do next:
// kTransient (timeouts, no server, connection closed) -> retry later; kStoreFull (a stream, KV bucket or object
// store at its max_bytes, or the server out of storage) -> retry with backoff, never give the work up; kNotFound;
// kConflict (optimistic concurrency: wrong last sequence, KV revision mismatch, create on an existing key); kInvalid
// (bad argument or configuration); kPermanent (auth, permissions, TLS); kInternal (everything unexpected).
//
// The values are plain ints so this header does not pull in nats.h; pass natsStatus / jsErrCode values.
#pragma once

#include <string>
#include <string_view>

#include "flotilla/core/result.h"

namespace flotilla::bus {

//! The ErrorKind for a libnats status, JetStream error code (0 if none) and error text (may be empty).
ErrorKind classifyNatsError(int status, int js_code, std::string_view text);

//! Builds the Error for a failed libnats call: "<status text>: <detail> (jetstream error <code>)", kind from
//! classifyNatsError, where = `where` (the libnats function, e.g. "js_AddStream").
Error natsError(int status, std::string_view where, int js_code = 0, std::string_view detail = {});

//! What separates the store's name from the cause in a kStoreFull message: "<what> <name> is full: <cause>".
inline constexpr std::string_view kStoreFullMarker = " is full: ";

//! Turns `error` into kStoreFull naming the store: "<what> <name> is full: <message>" (what = "stream",
//! "KV bucket", "object store"), so the status a user reads says which store.
Error storeFullError(Error error, std::string_view what, std::string_view name);

//! storeFullError for the JetStream stream `stream`: KV_<b> is "KV bucket <b>", OBJ_<b> "object store <b>", any
//! other "stream <stream>".
Error storeFullInStream(Error error, std::string_view stream);

//! The name of the full store of a kStoreFull error made by storeFullError ("unknown" without one); "" for any
//! other error. The `store` label of store_full_total.
std::string fullStoreName(const Error& error);

//! Same, reading the detail text from libnats' per-thread last-error (call it on the thread that made the
//! failing call, right after it).
Error lastNatsError(int status, std::string_view where, int js_code = 0);

}  // namespace flotilla::bus

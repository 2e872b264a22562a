// flotilla/kube/errors.h
//
// The one place where Kubernetes API answers become Flotilla errors. The API server's Status object message is
// kept as the Error message (it names the object, field and reason); the HTTP status decides the kind:
//   404 -> kNotFound, 409 -> kConflict, 410 -> kConflict and isGone(), 400/422 -> kInvalid,
//   401/403 -> kPermanent, 429/5xx -> kTransient, anything else unexpected -> kInternal.
// Transport failures (refused, reset, timeout) are kTransient and come from the HTTP client. The HTTP status is
// recorded at the end of Error::where ("PATCH /api/v1/...: HTTP 409"), which httpStatusOf() reads back.
#pragma once

#include <string>
#include <string_view>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"

namespace flotilla::kube {

//! The ErrorKind for an HTTP status code of a Kubernetes API response (2xx is not an error: kInternal).
ErrorKind errorKindForHttpStatus(int http_status);

//! An Error from a non-2xx API response. `body` is normally a Status object; when it is not (a proxy's HTML, an
//! empty body), the message says so and includes the start of the body. `where` names the request
//! ("GET /api/v1/namespaces/x").
Error apiError(int http_status, std::string_view body, std::string_view where);

//! An Error from a Status object that arrived on its own (a watch ERROR event), using its `code`.
Error statusError(const Json& status, std::string_view where);

//! The HTTP status an apiError() carried, 0 for other errors.
int httpStatusOf(const Error& error);

//! True for 410 Gone: a watch or list resourceVersion is too old. The caller must list again and watch from the
//! list's resourceVersion.
bool isGone(const Error& error);

}  // namespace flotilla::kube

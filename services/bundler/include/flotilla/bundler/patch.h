// flotilla/bundler/patch.h
//
// The patches of Fleet's yaml.overlays (overlays/<name>/<file>_patch.<ext>): a list is an RFC 6902 JSON patch, a
// map an RFC 7386 JSON merge patch. Fleet applies a strategic merge patch to built-in Kubernetes kinds; without
// the Kubernetes schemas we apply a merge patch, which differs only for lists (a merge patch replaces a list,
// a strategic merge merges e.g. containers by name) — write such patches as JSON patches.
#pragma once

#include <string_view>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"

namespace flotilla::bundler {

//! Applies an RFC 6902 patch (add, remove, replace, move, copy, test) to `target`. kInvalid naming the failing
//! operation (index and path); `target` is unchanged on failure.
Status applyJsonPatch(Json& target, const Json& patch);

//! RFC 6901: the value at `pointer` in `doc`, or nullptr. "~1" is "/", "~0" is "~".
const Json* resolvePointer(const Json& doc, std::string_view pointer);

}  // namespace flotilla::bundler

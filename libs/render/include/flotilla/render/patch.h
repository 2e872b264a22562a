// flotilla/render/patch.h
//
// The patches of Fleet's yaml.overlays (overlays/<name>/<file>_patch.<ext>): a list is an RFC 6902 JSON patch; a
// map is a strategic merge patch when the target is a built-in Kubernetes kind and an RFC 7386 JSON merge patch
// otherwise (CRDs and unknown kinds have no merge keys we could know), as in Fleet.
//
// Strategic merge without the Kubernetes schemas: the merge keys of the lists that matter in practice are built
// in (kStrategicListKeys below); every other list is replaced, which is also what Kubernetes does for lists
// without a patch strategy (tolerations, args, command, rules, ...). Directives: `$patch: replace|delete|merge`
// in a map or as a list item, `$retainKeys`, `$deleteFromPrimitiveList/<field>`; `$setElementOrder/<field>` is
// accepted and ignored (the order of merged lists is: original items in place, new items appended).
#pragma once

#include <string_view>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"

namespace flotilla::render {

//! Applies an RFC 6902 patch (add, remove, replace, move, copy, test) to `target`. kInvalid naming the failing
//! operation (index and path); `target` is unchanged on failure.
Status applyJsonPatch(Json& target, const Json& patch);

//! Whether `apiVersion` names a built-in Kubernetes API group: the core group ("v1"), an unsuffixed group
//! (apps, batch, policy, autoscaling) or one ending in ".k8s.io" (the suffix Kubernetes reserves).
bool isBuiltinApiVersion(std::string_view api_version);

//! Applies a strategic merge patch to `target` (a built-in Kubernetes object). kInvalid naming the field path
//! for a bad directive or a list item without its merge key; `target` is unchanged on failure.
Status applyStrategicMergePatch(Json& target, const Json& patch);

//! The `<x>_patch` rule: a JSON patch for a list, a strategic merge patch for a map when `target` is a built-in
//! kind (by its apiVersion), a JSON merge patch otherwise. kInvalid for any other patch type.
Status applyOverlayPatch(Json& target, const Json& patch);

//! RFC 6901: the value at `pointer` in `doc`, or nullptr. "~1" is "/", "~0" is "~".
const Json* resolvePointer(const Json& doc, std::string_view pointer);

}  // namespace flotilla::render

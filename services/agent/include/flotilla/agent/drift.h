// flotilla/agent/drift.h
//
// The pure part of drift detection (docs/pipeline.md stage 5, "Drift"). Server-side apply records, per field
// manager, the set of fields it manages (metadata.managedFields[].fieldsV1). Right after the agent's apply, the
// entry of manager `flotilla` (operation Apply) is exactly the set of fields the bundle manages. When another
// writer changes one of those fields to another value, the API server moves the field to that writer's entry;
// when a writer removes it, it leaves every entry. So drift is: the fields of the applied set that the live
// `flotilla` entry no longer holds — and the entry that holds such a field now names the other writer — unless
// the live value is back to the applied one (an edit undone: the field stays with the other writer, but nothing
// differs). Of the applied object only a hash of each field's value is kept (a list item or map the entry marks
// with "." only has to exist). The values compared are the API server's own answers, so defaults and formats it
// normalises never look like drift.
//
// Field paths are kept in fieldsV1's own segments ("f:spec", "k:{\"name\":\"web\"}", "v:\"x\"", "i:0") joined by
// '\t' (a tab is always escaped inside fieldsV1's JSON keys), shown as ".spec.containers[name=web].image".
// diff.comparePatches (Fleet's schema) exclude paths: each jsonPointers entry and each operation with op
// "remove" or "ignore" (its path) hides that field and everything under it, for the objects the patch names
// (apiVersion, kind, namespace, name; an empty one matches any). Pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/agent/objects.h"
#include "flotilla/core/json.h"
#include "flotilla/model/options.h"

namespace flotilla::agent {

//! A field path in fieldsV1 segments joined by '\t' (see the file comment).
using FieldPath = std::string;
using FieldSet = std::set<FieldPath>;
inline constexpr uint64_t kNodeHash = 0;

//! The fields the agent applied, each with a hash of its applied value (kNodeHash: a node that only has to exist),
//! sorted by path. The watch cache holds this for every managed object (bench_agent: 1,221 objects), and the objects
//! of one kind applied from one template have the same paths: once every field is added, shrink() swaps the paths
//! for a block shared by every FieldValues with the same ones (a process-wide pool that forgets a block when its
//! last user goes), so each object keeps only its values' hashes.
class FieldValues {
 public:
  struct Field {
    std::string_view path;
    uint64_t hash = kNodeHash;
  };
  //! Appends a field; paths come in ascending order (asserted), as managedFields' maps give them. Not after
  //! shrink() (asserted).
  void add(std::string_view path, uint64_t hash);
  //! Shares the paths with the FieldValues that have the same ones and gives back the spare capacity.
  void shrink();
  [[nodiscard]] size_t size() const { return hashes_.size(); }
  [[nodiscard]] bool empty() const { return hashes_.empty(); }
  [[nodiscard]] Field operator[](size_t index) const;

  //! The paths of a FieldValues: one block of text and where each path ends in it.
  struct Paths {
    std::string text;
    std::vector<uint32_t> ends;
  };

 private:
  std::shared_ptr<const Paths> paths_;  //!< shared once shrink() ran
  std::unique_ptr<Paths> building_;     //!< while fields are added
  std::vector<uint64_t> hashes_;
};

//! How many distinct path blocks the pool shares now (tests).
size_t sharedFieldPathBlocks();

//! How many changed paths one object's diff names at most.
inline constexpr size_t kMaxDriftPaths = 5;

//! The fields `manager` manages in `live` (metadata.managedFields), from its entries with `operation` ("Apply",
//! "Update"; "" = any). Each leaf and each node marked "." (the node itself, e.g. a list item) is a path.
FieldSet managedFieldSet(const Json& live, std::string_view manager, std::string_view operation = "Apply");
//! The fields manager flotilla applied in `applied` (the apply's answer, or the live object), with their values'
//! hashes.
FieldValues appliedFieldValues(const Json& applied);
//! The value at `path` in `live`; nullptr when it has none.
const Json* valueAt(const Json& live, const FieldPath& path);

//! One field of the applied set that the agent no longer manages.
struct FieldChange {
  FieldPath path;
  std::string manager;  //!< the field manager that holds it now; "" when nobody does (the field was removed)
  bool operator==(const FieldChange&) const = default;
};

//! What differs between the desired and the live object on the fields Flotilla manages.
struct ObjectDrift {
  bool missing = false;              //!< the object was deleted
  std::vector<FieldChange> changes;  //!< outermost changed paths only, sorted
  [[nodiscard]] bool drifted() const { return missing || !changes.empty(); }
  bool operator==(const ObjectDrift&) const = default;
};

//! JSON pointers (RFC 6901) that hide fields of `ref` from drift, from diff.comparePatches (see the file comment).
std::vector<std::string> ignoredPointers(const model::DiffOptions& diff, const ObjectRef& ref);

//! The drift of `live` against `applied` (the fields the agent's apply left to manager flotilla), leaving out the
//! fields under `ignored` pointers and the lost fields whose value is the applied one. A path whose prefix is also
//! changed is not listed on its own.
ObjectDrift computeDrift(const FieldValues& applied, const Json& live, const std::vector<std::string>& ignored);

//! ".spec.containers[name=web].image" for a field path.
std::string displayPath(const FieldPath& path);
//! The JSON pointer tokens of `path` in `live` (list items found by their key or value; an item `live` does not
//! have keeps its fieldsV1 segment, which no pointer matches).
std::vector<std::string> pointerTokens(const FieldPath& path, const Json& live);

//! "missing", or "changed by kubectl-edit: .spec.replicas, .data.b; removed: .data.c" (at most kMaxDriftPaths
//! paths, then "(+N more)").
std::string describeDrift(const ObjectDrift& drift);

}  // namespace flotilla::agent

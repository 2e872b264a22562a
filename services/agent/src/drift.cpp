// Drift from server-side apply's field ownership (drift.h): field sets, lost fields, comparePatches, messages.
#include "flotilla/agent/drift.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>

#include "flotilla/agent/applier.h"

namespace flotilla::agent {
namespace {

constexpr char kSeparator = '\t';

//! Every path of a fieldsV1 tree, true for nodes marked "." (the node itself is managed), false for leaves.
void collectFields(const Json& node, const std::string& prefix, std::map<FieldPath, bool>& out) {
  if (!node.isObject()) {
    return;
  }
  for (const auto& [key, child] : node.asObject()) {
    if (key == ".") {
      if (!prefix.empty()) {
        out.emplace(prefix, true);
      }
      continue;
    }
    std::string path = prefix;
    if (!path.empty()) {
      path += kSeparator;
    }
    path += key;
    if (!child.isObject() || child.asObject().empty()) {
      out.emplace(path, false);
      continue;
    }
    collectFields(child, path, out);
  }
}

//! The fields of the managedFields entries of `manager` (and `operation`, "" = any), nodes marked true.
std::map<FieldPath, bool> entryFields(const Json& live, std::string_view manager, std::string_view operation) {
  std::map<FieldPath, bool> out;
  const Json* entries = live.at({"metadata", "managedFields"});
  if (entries == nullptr || !entries->isArray()) {
    return out;
  }
  for (const auto& entry : entries->asArray()) {
    if (entry.getString("manager") != manager || (!operation.empty() && entry.getString("operation") != operation)) {
      continue;
    }
    if (const Json* fields = entry.find("fieldsV1")) {
      collectFields(*fields, "", out);
    }
  }
  return out;
}

//! FNV-1a of a value's canonical form (never kNodeHash).
uint64_t valueHash(const Json& value) {
  uint64_t hash = 14695981039346656037ULL;
  for (unsigned char c : value.dump()) {
    hash = (hash ^ c) * 1099511628211ULL;
  }
  return hash == kNodeHash ? 1 : hash;
}

std::vector<std::string> splitPath(const FieldPath& path) {
  std::vector<std::string> segments;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(kSeparator, start);
    if (end == std::string::npos) {
      end = path.size();
    }
    segments.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return segments;
}

//! Whether `path` lies under (or is) one of the ignored pointers.
bool isIgnored(const FieldPath& path, const Json& live, const std::vector<std::vector<std::string>>& ignored) {
  if (ignored.empty()) {
    return false;
  }
  std::vector<std::string> tokens = pointerTokens(path, live);
  return std::any_of(ignored.begin(), ignored.end(), [&](const std::vector<std::string>& pointer) {
    return pointer.size() <= tokens.size() && std::equal(pointer.begin(), pointer.end(), tokens.begin());
  });
}

//! RFC 6901: "/a/b~1c" -> ["a", "b/c"].
std::vector<std::string> parsePointer(std::string_view pointer) {
  std::vector<std::string> tokens;
  if (pointer.empty()) {
    return tokens;
  }
  size_t start = pointer.front() == '/' ? 1 : 0;
  while (start <= pointer.size()) {
    size_t end = pointer.find('/', start);
    if (end == std::string_view::npos) {
      end = pointer.size();
    }
    std::string token;
    for (size_t i = start; i < end; ++i) {
      if (pointer[i] == '~' && i + 1 < end && (pointer[i + 1] == '0' || pointer[i + 1] == '1')) {
        token += pointer[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        token += pointer[i];
      }
    }
    tokens.push_back(std::move(token));
    start = end + 1;
  }
  return tokens;
}

//! The index of the list item a "k:" or "v:" segment names in `list`; -1 when absent.
int64_t itemIndex(const Json& list, std::string_view segment) {
  auto spec = Json::parse(segment.substr(2));
  if (!spec.ok() || !list.isArray()) {
    return -1;
  }
  const auto& items = list.asArray();
  for (size_t i = 0; i < items.size(); ++i) {
    bool match = false;
    if (segment.starts_with("v:")) {
      match = items[i] == *spec;
    } else if (spec->isObject()) {
      match = std::all_of(spec->asObject().begin(), spec->asObject().end(), [&](const auto& key_value) {
        const Json* field = items[i].find(key_value.first);
        return field != nullptr && *field == key_value.second;
      });
    }
    if (match) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

std::string displaySegment(std::string_view segment) {
  if (segment.starts_with("f:")) {
    return "." + std::string(segment.substr(2));
  }
  if (segment.starts_with("i:")) {
    return "[" + std::string(segment.substr(2)) + "]";
  }
  auto spec = Json::parse(segment.substr(2));
  if (!spec.ok()) {
    return std::string(segment);
  }
  if (segment.starts_with("k:") && spec->isObject()) {
    std::string text;
    for (const auto& [key, value] : spec->asObject()) {
      text += (text.empty() ? "" : ",") + key + "=" + (value.isString() ? value.asString() : value.dump());
    }
    return "[" + text + "]";
  }
  return "[" + (spec->isString() ? spec->asString() : spec->dump()) + "]";
}

}  // namespace

FieldSet managedFieldSet(const Json& live, std::string_view manager, std::string_view operation) {
  FieldSet out;
  for (const auto& [path, node] : entryFields(live, manager, operation)) {
    out.insert(path);
  }
  return out;
}

namespace {

//! The pool FieldValues::shrink() shares path blocks through, keyed by the block's text (every path, each with its
//! end, so equal text means equal paths). A block leaves the pool when its last user drops it (the deleter).
struct PathPool {
  std::mutex mutex;
  std::unordered_map<std::string_view, std::weak_ptr<const FieldValues::Paths>> blocks;
};

PathPool& pathPool() {
  static auto* pool = new PathPool;  // never destroyed: blocks may be dropped by static destructors after main
  return *pool;
}

void forgetBlock(const FieldValues::Paths* paths) {
  PathPool& pool = pathPool();
  {
    std::lock_guard lock(pool.mutex);
    auto it = pool.blocks.find(paths->text);
    if (it != pool.blocks.end() && it->first.data() == paths->text.data()) {
      pool.blocks.erase(it);  // (a block made after this one expired has its own key)
    }
  }
  delete paths;  // NOLINT(cppcoreguidelines-owning-memory): the shared_ptr deleter of shareBlock
}

std::shared_ptr<const FieldValues::Paths> shareBlock(std::unique_ptr<FieldValues::Paths> paths) {
  PathPool& pool = pathPool();
  // Dropped after the lock (declared before it): it may be the block's last reference, whose deleter takes the lock.
  std::shared_ptr<const FieldValues::Paths> other;
  std::lock_guard lock(pool.mutex);
  auto it = pool.blocks.find(paths->text);
  if (it != pool.blocks.end()) {
    other = it->second.lock();
    if (other && other->ends == paths->ends) {
      return other;
    }
    pool.blocks.erase(it);  // expired (its deleter waits for the lock), or other ends: this one replaces it
  }
  paths->text.shrink_to_fit();
  paths->ends.shrink_to_fit();
  std::shared_ptr<const FieldValues::Paths> shared(paths.release(), forgetBlock);
  pool.blocks.emplace(shared->text, shared);
  return shared;
}

}  // namespace

size_t sharedFieldPathBlocks() {
  PathPool& pool = pathPool();
  std::lock_guard lock(pool.mutex);
  return pool.blocks.size();
}

void FieldValues::add(std::string_view path, uint64_t hash) {
  assert(!paths_);
  assert(hashes_.empty() || (*this)[hashes_.size() - 1].path < path);
  if (!building_) {
    building_ = std::make_unique<Paths>();
  }
  building_->text.append(path);
  building_->ends.push_back(static_cast<uint32_t>(building_->text.size()));
  hashes_.push_back(hash);
}

void FieldValues::shrink() {
  if (building_) {
    paths_ = shareBlock(std::move(building_));
  }
  hashes_.shrink_to_fit();
}

FieldValues::Field FieldValues::operator[](size_t index) const {
  const Paths& paths = paths_ ? *paths_ : *building_;
  const size_t begin = index == 0 ? 0 : paths.ends[index - 1];
  return Field{.path = std::string_view(paths.text).substr(begin, paths.ends[index] - begin), .hash = hashes_[index]};
}

FieldValues appliedFieldValues(const Json& applied) {
  FieldValues out;
  for (const auto& [path, node] : entryFields(applied, kFieldManager, "Apply")) {  // a map: sorted by path
    const Json* value = node ? nullptr : valueAt(applied, path);
    out.add(path, value != nullptr ? valueHash(*value) : kNodeHash);
  }
  out.shrink();
  return out;
}

const Json* valueAt(const Json& live, const FieldPath& path) {
  const Json* node = &live;
  for (const auto& segment : splitPath(path)) {
    if (node == nullptr) {
      return nullptr;
    }
    if (segment.starts_with("f:")) {
      node = node->find(std::string_view(segment).substr(2));
    } else if (segment.starts_with("i:")) {
      size_t index = std::strtoull(segment.c_str() + 2, nullptr, 10);
      node = node->isArray() && index < node->asArray().size() ? &node->asArray()[index] : nullptr;
    } else {
      int64_t index = itemIndex(*node, segment);
      node = index >= 0 ? &node->asArray()[static_cast<size_t>(index)] : nullptr;
    }
  }
  return node;
}

namespace {

//! Whether a field flotilla no longer holds still has the applied value (an edit that was undone).
bool stillApplied(const FieldPath& path, uint64_t hash, const Json& live) {
  const Json* value = valueAt(live, path);
  if (value == nullptr) {
    return false;
  }
  return hash == kNodeHash || valueHash(*value) == hash;
}

}  // namespace

std::vector<std::string> ignoredPointers(const model::DiffOptions& diff, const ObjectRef& ref) {
  std::vector<std::string> pointers;
  for (const auto& patch : diff.compare_patches) {
    const bool matches = (patch.kind.empty() || patch.kind == ref.kind) &&
                         (patch.api_version.empty() || patch.api_version == ref.api_version) &&
                         (patch.ns.empty() || patch.ns == ref.ns) && (patch.name.empty() || patch.name == ref.name);
    if (!matches) {
      continue;
    }
    pointers.insert(pointers.end(), patch.json_pointers.begin(), patch.json_pointers.end());
    for (const auto& operation : patch.operations) {
      if (operation.op == "remove" || operation.op == "ignore") {
        pointers.push_back(operation.path);
      }
    }
  }
  return pointers;
}

ObjectDrift computeDrift(const FieldValues& applied, const Json& live, const std::vector<std::string>& ignored) {
  const FieldSet held = managedFieldSet(live, kFieldManager, "Apply");
  std::vector<std::vector<std::string>> pointers;
  pointers.reserve(ignored.size());
  for (const auto& pointer : ignored) {
    pointers.push_back(parsePointer(pointer));
  }
  std::vector<FieldPath> lost;
  for (size_t i = 0; i < applied.size(); ++i) {
    const auto field = applied[i];
    FieldPath path(field.path);
    if (!held.contains(path) && !stillApplied(path, field.hash, live) && !isIgnored(path, live, pointers)) {
      lost.push_back(std::move(path));
    }
  }
  // Who holds each lost field now: every other entry of managedFields (another manager, or flotilla's Update).
  std::vector<std::pair<std::string, FieldSet>> others;
  if (const Json* entries = live.at({"metadata", "managedFields"}); entries != nullptr && entries->isArray()) {
    for (const auto& entry : entries->asArray()) {
      std::string manager = entry.getString("manager");
      if (manager == kFieldManager && entry.getString("operation") == "Apply") {
        continue;
      }
      std::map<FieldPath, bool> paths;
      if (const Json* v1 = entry.find("fieldsV1")) {
        collectFields(*v1, "", paths);
      }
      FieldSet fields;
      for (const auto& [path, node] : paths) {
        fields.insert(path);
      }
      others.emplace_back(std::move(manager), std::move(fields));
    }
  }
  ObjectDrift drift;
  for (const auto& path : lost) {  // sorted: a prefix comes before the paths under it
    if (!drift.changes.empty() && path.starts_with(drift.changes.back().path + kSeparator)) {
      continue;
    }
    FieldChange change{.path = path};
    for (const auto& [manager, fields] : others) {
      if (fields.contains(path)) {
        change.manager = manager;
        break;
      }
    }
    drift.changes.push_back(std::move(change));
  }
  return drift;
}

std::string displayPath(const FieldPath& path) {
  std::string text;
  for (const auto& segment : splitPath(path)) {
    text += displaySegment(segment);
  }
  return text;
}

std::vector<std::string> pointerTokens(const FieldPath& path, const Json& live) {
  std::vector<std::string> tokens;
  const Json* node = &live;
  for (const auto& segment : splitPath(path)) {
    std::string token = segment;
    if (segment.starts_with("f:")) {
      token = segment.substr(2);
      node = node != nullptr ? node->find(token) : nullptr;
    } else if (segment.starts_with("i:")) {
      token = segment.substr(2);
      size_t index = std::strtoull(token.c_str(), nullptr, 10);
      node = node != nullptr && node->isArray() && index < node->asArray().size() ? &node->asArray()[index] : nullptr;
    } else {
      int64_t index = node != nullptr ? itemIndex(*node, segment) : -1;
      if (index >= 0) {
        token = std::to_string(index);
        node = &node->asArray()[static_cast<size_t>(index)];
      } else {
        node = nullptr;
      }
    }
    tokens.push_back(std::move(token));
  }
  return tokens;
}

std::string describeDrift(const ObjectDrift& drift) {
  if (drift.missing) {
    return "missing";
  }
  // Group the paths by the writer that holds them now, in the order the writers first appear.
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> by_manager;
  for (size_t i = 0; i < drift.changes.size() && i < kMaxDriftPaths; ++i) {
    const auto& change = drift.changes[i];
    if (!by_manager.contains(change.manager)) {
      order.push_back(change.manager);
    }
    by_manager[change.manager].push_back(displayPath(change.path));
  }
  std::string text;
  for (const auto& manager : order) {
    text += text.empty() ? "" : "; ";
    text += manager.empty() ? "removed: " : "changed by " + manager + ": ";
    const auto& paths = by_manager[manager];
    for (size_t i = 0; i < paths.size(); ++i) {
      text += (i == 0 ? "" : ", ") + paths[i];
    }
  }
  if (drift.changes.size() > kMaxDriftPaths) {
    text += " (+" + std::to_string(drift.changes.size() - kMaxDriftPaths) + " more)";
  }
  return text;
}

}  // namespace flotilla::agent

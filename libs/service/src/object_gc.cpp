#include "flotilla/service/object_gc.h"

#include "flotilla/core/log.h"

namespace flotilla::service {

ObjectGc::ObjectGc(std::shared_ptr<bus::ObjectStore> store, ReferenceSource references, Metrics& metrics,
                   GcOptions options)
    : store_(std::move(store)), references_(std::move(references)), metrics_(metrics), options_(options) {}

ObjectGc::~ObjectGc() {
  stop();
}

Clock& ObjectGc::clock() const {
  return options_.clock != nullptr ? *options_.clock : systemClock();
}

void ObjectGc::start() {
  passes_.start([this] { loop(); });
}

void ObjectGc::stop() {
  passes_.stop();
}

void ObjectGc::requestPass() {
  passes_.wake();
}

void ObjectGc::loop() {
  while (passes_.sleepFor(options_.interval)) {
    (void)runPass();  // logged and counted inside
  }
}

void ObjectGc::touch(const std::string& name) {
  const SystemTime now = clock().now();
  std::lock_guard lock(touch_mutex_);
  touched_[name] = now;
  // Forget touches older than the grace period, so the map stays as small as the recent writes.
  for (auto it = touched_.begin(); it != touched_.end();) {
    it = now - it->second > options_.grace ? touched_.erase(it) : std::next(it);
  }
}

bool ObjectGc::touchedWithinGrace(const std::string& name, SystemTime now) const {
  auto found = touched_.find(name);
  return found != touched_.end() && now - found->second <= options_.grace;
}

bool ObjectGc::purgeIfUnused(const bus::ObjectInfo& object, SystemTime now, GcPass& pass) {
  std::lock_guard lock(touch_mutex_);
  if (touchedWithinGrace(object.name, now)) {
    ++pass.young;
    return true;
  }
  Status purged = store_->purge(object.name);
  if (!purged.ok() && purged.error().kind != ErrorKind::kNotFound) {
    log::warn("garbage collection could not delete an object; the pass stops",
              {{"store", store_->bucket()}, {"object", object.name}, {"error", purged.error().describe()}});
    return false;
  }
  ++pass.deleted;
  pass.deleted_bytes += object.size;
  log::debug("garbage collection deleted an object",
             {{"store", store_->bucket()}, {"object", object.name}, {"bytes", static_cast<int64_t>(object.size)}});
  return true;
}

Result<GcPass> ObjectGc::runPass() {
  std::lock_guard pass_lock(pass_mutex_);
  const std::string& store = store_->bucket();
  auto failed = [&](std::string_view step, const Error& error) -> Result<GcPass> {
    metrics_.counter("gc_runs_total", "Garbage collection passes by result", {{"store", store}, {"result", "error"}})
        .Increment();
    log::warn("garbage collection pass failed; nothing was deleted that a reference could name",
              {{"store", store}, {"step", std::string(step)}, {"error", error.describe()}});
    return fail(error);
  };
  // List first, references second: an object stored after the listing is not a candidate, and a reference
  // written after the reading belongs to an object its writer touched (or stored) first.
  auto objects = store_->list();
  if (!objects.ok()) {
    return failed("list", objects.error());
  }
  GcPass pass;
  pass.objects = objects->size();
  const SystemTime now = clock().now();
  std::vector<const bus::ObjectInfo*> old;
  for (const auto& object : *objects) {
    auto written = parseRfc3339(object.mtime);
    if (written && now - *written <= options_.grace) {
      ++pass.young;
    } else {
      old.push_back(&object);  // an unreadable mtime is as good as old: references still protect it
    }
  }
  if (!old.empty()) {
    auto referenced = references_();
    if (!referenced.ok()) {
      return failed("references", referenced.error());
    }
    for (const bus::ObjectInfo* object : old) {
      if (referenced->count(object->name) != 0) {
        ++pass.referenced;
      } else if (!purgeIfUnused(*object, now, pass)) {
        break;
      }
    }
  }
  metrics_.counter("gc_runs_total", "Garbage collection passes by result", {{"store", store}, {"result", "ok"}})
      .Increment();
  metrics_.counter("gc_deleted_objects_total", "Objects deleted by garbage collection", {{"store", store}})
      .Increment(static_cast<double>(pass.deleted));
  metrics_.counter("gc_deleted_bytes_total", "Bytes of the objects deleted by garbage collection", {{"store", store}})
      .Increment(static_cast<double>(pass.deleted_bytes));
  log::write(pass.deleted > 0 ? log::Level::kInfo : log::Level::kDebug, "garbage collection pass",
             {{"store", store},
              {"objects", static_cast<int64_t>(pass.objects)},
              {"deleted", static_cast<int64_t>(pass.deleted)},
              {"deleted_bytes", static_cast<int64_t>(pass.deleted_bytes)},
              {"kept_referenced", static_cast<int64_t>(pass.referenced)},
              {"kept_young", static_cast<int64_t>(pass.young)}});
  return pass;
}

}  // namespace flotilla::service

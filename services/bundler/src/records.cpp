#include "flotilla/bundler/records.h"

#include <set>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"

namespace flotilla::bundler {
namespace {

//! A strict reader for our own records: every field is checked for its type, unknown ones are rejected.
class Reader {
 public:
  Reader(const Json& json, std::string_view what) : json_(json), what_(what) {
    if (!json.isObject()) {
      problem_ = what_ + ": expected a map";
    }
  }

  void str(std::string_view key, std::string& out, bool required = false) {
    const Json* value = take(key);
    if (value == nullptr) {
      if (required) {
        note(key, "is required");
      }
      return;
    }
    if (!value->isString()) {
      note(key, "expected a string");
      return;
    }
    out = value->asString();
  }

  void u64(std::string_view key, uint64_t& out) {
    const Json* value = take(key);
    if (value == nullptr) {
      return;
    }
    if (!value->isInt() || value->asInt() < 0) {
      note(key, "expected a non-negative integer");
      return;
    }
    out = static_cast<uint64_t>(value->asInt());
  }

  void error(std::string_view key, std::optional<events::RenderError>& out) {
    const Json* value = take(key);
    if (value == nullptr || value->isNull()) {
      return;
    }
    if (!value->isObject()) {
      note(key, "expected a map");
      return;
    }
    Reader inner(*value, what_ + "." + std::string(key));
    events::RenderError error;
    inner.str("file", error.file);
    uint64_t line = 0;
    inner.u64("line", line);
    error.line = static_cast<int64_t>(line);
    inner.str("message", error.message, true);
    if (auto status = inner.finish(); !status.ok()) {
      problem_ = status.error().message;
      return;
    }
    out = std::move(error);
  }

  const Json* take(std::string_view key) {
    seen_.insert(std::string(key));
    const Json* value = json_.find(key);
    return value;
  }

  void note(std::string_view key, std::string_view what) {
    if (problem_.empty()) {
      problem_ = what_ + "." + std::string(key) + ": " + std::string(what);
    }
  }

  Status finish() {
    if (problem_.empty() && json_.isObject()) {
      for (const auto& [key, value] : json_.asObject()) {
        if (seen_.count(key) == 0) {
          problem_ = what_ + "." + key + ": unknown field";
          break;
        }
      }
    }
    if (!problem_.empty()) {
      return fail(ErrorKind::kInvalid, problem_);
    }
    return {};
  }

 private:
  const Json& json_;
  std::string what_;
  std::set<std::string, std::less<>> seen_;
  std::string problem_;
};

Json encodeError(const events::RenderError& error) {
  return Json::obj({{"file", error.file}, {"line", error.line}, {"message", error.message}});
}

Status checkEnvelope(Reader& in, std::string_view kind) {
  std::string api_version;
  std::string actual_kind;
  in.str("apiVersion", api_version, true);
  in.str("kind", actual_kind, true);
  if (api_version != kRecordApiVersion || actual_kind != kind) {
    return fail(ErrorKind::kInvalid, "not a " + std::string(kind) + " (" + std::string(kRecordApiVersion) + ")");
  }
  return {};
}

}  // namespace

Json encode(const BundleRecord& record) {
  Json out = Json::obj({{"apiVersion", kRecordApiVersion},
                        {"kind", BundleRecord::kKind},
                        {"workspace", record.workspace},
                        {"gitrepo", record.gitrepo},
                        {"bundle", record.bundle},
                        {"path", record.path},
                        {"commit", record.commit},
                        {"commitSequence", record.commit_sequence},
                        {"manifestID", record.last_good ? record.last_good->manifest_id : std::string()}});
  if (!record.source_object.empty()) {
    out["sourceObject"] = record.source_object;
  }
  if (record.last_good) {
    out["lastGood"] = events::encode(*record.last_good);
  }
  if (record.error) {
    out["error"] = encodeError(*record.error);
  }
  return out;
}

Result<BundleRecord> parseBundleRecord(std::string_view text) {
  auto json = Json::parse(text);
  if (!json.ok()) {
    return fail(json.error());
  }
  return decodeBundleRecord(*json);
}

Result<BundleRecord> decodeBundleRecord(const Json& json) {
  Reader in(json, "BundleRecord");
  FLOTILLA_TRY(checkEnvelope(in, BundleRecord::kKind));
  BundleRecord record;
  in.str("workspace", record.workspace, true);
  in.str("gitrepo", record.gitrepo, true);
  in.str("bundle", record.bundle, true);
  in.str("path", record.path);
  in.str("commit", record.commit);
  in.u64("commitSequence", record.commit_sequence);
  in.str("sourceObject", record.source_object);
  std::string manifest_id;
  in.str("manifestID", manifest_id);
  in.error("error", record.error);
  if (const Json* last_good = in.take("lastGood"); last_good != nullptr && !last_good->isNull()) {
    auto event = events::decodePayload<events::BundleEvent>(*last_good);
    if (!event.ok()) {
      return fail(ErrorKind::kInvalid, "BundleRecord.lastGood: " + event.error().message);
    }
    record.last_good = std::move(event).value();
  }
  FLOTILLA_TRY(in.finish());
  return record;
}

Json encode(const RenderStatus& status) {
  Json out = Json::obj({{"apiVersion", kRecordApiVersion},
                        {"kind", RenderStatus::kKind},
                        {"workspace", status.workspace},
                        {"gitrepo", status.gitrepo},
                        {"bundle", status.bundle},
                        {"path", status.path},
                        {"commit", status.commit},
                        {"manifestID", status.manifest_id},
                        {"lastGoodManifestID", status.last_good_manifest_id},
                        {"time", status.time}});
  out["error"] = status.error ? encodeError(*status.error) : Json();
  if (!status.chart.empty()) {
    out["chart"] = status.chart;
    out["chartVersion"] = status.chart_version;
    out["chartDigest"] = status.chart_digest;
  }
  return out;
}

Result<RenderStatus> decodeRenderStatus(const Json& json) {
  Reader in(json, "BundleRenderStatus");
  FLOTILLA_TRY(checkEnvelope(in, RenderStatus::kKind));
  RenderStatus status;
  in.str("workspace", status.workspace, true);
  in.str("gitrepo", status.gitrepo, true);
  in.str("bundle", status.bundle, true);
  in.str("path", status.path);
  in.str("commit", status.commit);
  in.str("manifestID", status.manifest_id);
  in.str("lastGoodManifestID", status.last_good_manifest_id);
  in.str("time", status.time);
  in.error("error", status.error);
  in.str("chart", status.chart);
  in.str("chartVersion", status.chart_version);
  in.str("chartDigest", status.chart_digest);
  FLOTILLA_TRY(in.finish());
  return status;
}

std::string renderStatusKey(std::string_view workspace, std::string_view bundle) {
  return events::bundleRenderStatusKey(workspace, bundle);
}

std::string eventDigest(const events::BundleEvent& event) {
  events::BundleEvent copy = event;
  copy.id.clear();
  copy.time.clear();
  return sha256Hex(events::encode(copy).dump()).substr(0, 16);
}

std::string eventState(const events::BundleEvent& event) {
  if (event.deleted) {
    return "deleted";
  }
  if (event.error) {
    return "error";
  }
  return event.manifest_id.empty() ? event.variants_object : event.manifest_id;
}

std::string bundleMsgId(const events::BundleEvent& event) {
  return events::bundleMsgId(event.workspace, event.bundle, event.commit, eventState(event)) + "/" + eventDigest(event);
}

void stampEvent(events::BundleEvent& event) {
  event.id = bundleMsgId(event);
  event.time = log::nowRfc3339();
}

}  // namespace flotilla::bundler

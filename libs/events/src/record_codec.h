// flotilla/events/src/record_codec.h
//
// What the payload and record codecs (payloads.cpp, records.cpp, terminated.cpp) share:
// field lists of the shapes several of them embed, the small field helpers, and decoding one record with a
// strict Reader into one kInvalid Status. Field lists are written once over a visitor (flotilla/core/codec.h)
// and drive both the encoder and the strict decoder.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/core/codec.h"
#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/events/records.h"
#include "reader.h"

namespace flotilla::events::detail {

//! A field list's parameter: the struct T, const when encoding.
template <typename S, typename T>
concept FieldsOf = std::same_as<std::remove_const_t<S>, T>;

//! Every record's fields, named once for encode and decode: `recordFields(v, record)`, an overload per record
//! type (records.cpp), found by argument-dependent lookup.
inline constexpr auto kRecordFields = [](auto& v, auto& record) { recordFields(v, record); };

template <typename T>
Json RecordCodec<T>::encode(const T& value) {
  return codec::encode(value, kRecordFields, /*omit_empty=*/false);
}

//! Unknown fields and every problem are reported together, with paths starting at T::kKind.
template <typename T>
Result<T> RecordCodec<T>::decode(const Json& json) {
  std::vector<std::string> problems;
  Reader reader(json, std::string(T::kKind), problems);
  T out{};
  if (reader.ok()) {
    kRecordFields(reader, out);
  }
  reader.finish();
  if (auto status = problemsStatus(problems, T::kKind); !status.ok()) {
    return fail(status.error());
  }
  return out;
}

//! Checks a bundler record's apiVersion and kind.
void recordEnvelope(Reader& in, std::string_view api_version, std::string_view kind);

//! A record's apiVersion and kind: written as given, checked when read.
template <typename V>
void envelopeFields(V& v, std::string_view api_version, std::string_view kind) {
  if constexpr (codec::kDecoding<V>) {
    recordEnvelope(v, api_version, kind);
  } else {
    v.set("apiVersion", std::string(api_version));
    v.set("kind", std::string(kind));
  }
}

//! Records "unknown bundle state" at `key` unless `state` is empty or one of the seven bundle states.
void checkState(Reader& in, std::string_view key, const std::string& state);

//! A bundle state name field: one of the seven bundle states, or "".
template <typename V, typename S>
void stateField(V& v, std::string_view key, S& state, bool required = false) {
  v.str(key, state, required);
  v.validate([&](Reader& in) { checkState(in, key, state); });
}

//! An unsigned integer (a stream sequence, a count) that must not be negative.
struct Uint64Codec {
  bool read(Reader& in, std::string_view key, const Json& raw, uint64_t& out) const;
  [[nodiscard]] Json write(uint64_t value) const { return Json(static_cast<int64_t>(value)); }
};
inline constexpr Uint64Codec kUint64;

//! A whole payload (apiVersion, kind, id, time and its fields) nested in a record.
template <typename T>
struct PayloadCodec {
  bool read(Reader& in, std::string_view key, const Json& raw, T& out) const {
    auto decoded = decodePayload<T>(raw);
    if (!decoded.ok()) {
      in.fail(in.pathOf(key), decoded.error().message);
      return false;
    }
    out = std::move(decoded).value();
    return true;
  }
  [[nodiscard]] Json write(const T& value) const { return encode(value); }
};

inline constexpr auto kRenderErrorFields = [](auto& v, auto& s) {
  v.str("file", s.file);
  v.integer("line", s.line);
  v.str("message", s.message, true);
};

inline constexpr auto kObjectResultFields = [](auto& v, auto& s) {
  v.str("apiVersion", s.api_version);
  v.str("kind", s.kind, true);
  v.str("namespace", s.ns);
  v.str("name", s.name, true);
  stateField(v, "state", s.state);
  v.str("message", s.message);
};

// ---- groups of fields several payloads and records carry alike ----

//! Which GitRepo: its workspace and name, both required. CommitEvent, PollStatus, GitRepoSummary and
//! bundleSourceFields.
template <typename V, typename S>
void gitRepoKeyFields(V& v, S& s) {
  v.str("workspace", s.workspace, true);
  v.str("gitrepo", s.gitrepo, true);
}

//! Which rendering of which bundle: its GitRepo and name (required), its directory in the repository and the
//! commit. BundleEvent, and the bundler's BundleRecord, RenderStatus and BundleClaim.
template <typename V, typename S>
void bundleSourceFields(V& v, S& s, bool commit_required = false) {
  gitRepoKeyFields(v, s);
  v.str("bundle", s.bundle, true);
  v.str("path", s.path);
  v.str("commit", s.commit, commit_required);
}

//! Which BundleDeployment: its cluster, workspace and bundle, all required. DeployEvent and DeploymentRecord.
template <typename V, typename S>
void deploymentKeyFields(V& v, S& s) {
  v.str("cluster", s.cluster, true);
  v.str("workspace", s.workspace, true);
  v.str("bundle", s.bundle, true);
}

//! What an agent reports about one BundleDeployment: the StatusEvent, and the BdStatus the scheduler keeps of the
//! last one (bdStatusFrom). `state_required`: the event must name a state.
template <typename V, typename S>
void deploymentStatusFields(V& v, S& s, bool state_required) {
  v.str("cluster", s.cluster, true);
  v.str("workspace", s.workspace);
  v.str("bundle", s.bundle, true);
  v.str("deploymentID", s.deployment_id);
  v.integer("generation", s.generation);
  stateField(v, "state", s.state, state_required);
  v.str("reason", s.reason);
  v.str("message", s.message);
  v.objects("resources", s.resources, kObjectResultFields);
  v.str("agentVersion", s.agent_version);
}

}  // namespace flotilla::events::detail

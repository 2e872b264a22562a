// Decoding and encoding of Fleet's shared option structures (BundleDeploymentOptions, targets, rollout, ...).
#include "flotilla/model/codec.h"
#include "flotilla/model/identity.h"
#include "flotilla/model/state.h"
#include "option_fields.h"

namespace flotilla::model {

std::string IntOrPercent::toString() const {
  return std::to_string(value) + (percent ? "%" : "");
}

int64_t IntOrPercent::scaled(int64_t total, bool round_up) const {
  if (!percent) {
    return value;
  }
  int64_t product = total * value;
  return round_up ? (product + 99) / 100 : product / 100;
}

namespace {

template <typename T>
Result<T> decodeShared(const Json& value, std::string_view path) {
  return codec::decode<T>(value, path, kFields);
}

}  // namespace

Result<BundleDeploymentOptions> decodeOptions(const Json& value, std::string_view path) {
  return decodeShared<BundleDeploymentOptions>(value, path);
}
Json encodeOptions(const BundleDeploymentOptions& value) {
  return codec::encode(value, kFields);
}

Result<BundleTarget> decodeBundleTarget(const Json& value, std::string_view path) {
  return decodeShared<BundleTarget>(value, path);
}
Json encodeBundleTarget(const BundleTarget& value) {
  return codec::encode(value, kFields);
}

Result<GitTarget> decodeGitTarget(const Json& value, std::string_view path) {
  return decodeShared<GitTarget>(value, path);
}
Json encodeGitTarget(const GitTarget& value) {
  return codec::encode(value, kFields);
}

Result<BundleRef> decodeBundleRef(const Json& value, std::string_view path) {
  return decodeShared<BundleRef>(value, path);
}
Json encodeBundleRef(const BundleRef& value) {
  return codec::encode(value, kFields);
}

Result<RolloutStrategy> decodeRolloutStrategy(const Json& value, std::string_view path) {
  return decodeShared<RolloutStrategy>(value, path);
}
Json encodeRolloutStrategy(const RolloutStrategy& value) {
  return codec::encode(value, kFields);
}

Result<LabelSelector> decodeSelector(const Json& value, std::string_view path) {
  auto decoded = decodeShared<LabelSelector>(value, path);
  if (!decoded.ok()) {
    return decoded;
  }
  if (auto s = validateSelector(*decoded, path); !s.ok()) {
    return fail(s.error());
  }
  return decoded;
}

}  // namespace flotilla::model

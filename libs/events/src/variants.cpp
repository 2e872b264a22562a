#include "flotilla/events/variants.h"

#include "flotilla/core/util.h"
#include "reader.h"

namespace flotilla::events {

namespace {
constexpr std::string_view kVariantsApiVersion = "bundler.flotilla.io/v1";
}

Json encode(const BundleVariants& value) {
  Json out = Json::obj({{"apiVersion", std::string(kVariantsApiVersion)},
                        {"kind", std::string(BundleVariants::kKind)},
                        {"workspace", value.workspace},
                        {"bundle", value.bundle},
                        {"commit", value.commit}});
  Json variants = Json::array();
  for (const auto& variant : value.variants) {
    Json customizations = Json::array();
    for (const auto& name : variant.customizations) {
      customizations.push(name);
    }
    variants.push(Json::obj({{"manifestID", variant.manifest_id},
                             {"options", variant.options},
                             {"customizations", std::move(customizations)}}));
  }
  out["variants"] = std::move(variants);
  Json clusters = Json::object();
  for (const auto& [cluster, index] : value.clusters) {
    clusters[cluster] = index;
  }
  out["clusters"] = std::move(clusters);
  return out;
}

Result<BundleVariants> decodeBundleVariants(const Json& json) {
  std::vector<std::string> problems;
  BundleVariants out;
  detail::Reader in(json, std::string(BundleVariants::kKind), problems);
  if (in.ok()) {
    std::string api_version;
    std::string kind;
    in.str("apiVersion", api_version, true);
    in.str("kind", kind, true);
    if (!kind.empty() && kind != BundleVariants::kKind) {
      in.fail(in.pathOf("kind"), "expected BundleVariants, got \"" + kind + "\"");
    }
    in.str("workspace", out.workspace, true);
    in.str("bundle", out.bundle, true);
    in.str("commit", out.commit);
    in.objects("variants", out.variants, [](detail::Reader& v, Variant& variant) {
      v.str("manifestID", variant.manifest_id, true);
      v.object("options", variant.options);
      v.strings("customizations", variant.customizations);
    });
    const Json* clusters = in.take("clusters");
    if (clusters != nullptr && !clusters->isObject()) {
      in.fail(in.pathOf("clusters"), "expected a map");
    } else if (clusters != nullptr) {
      for (const auto& [cluster, index] : clusters->asObject()) {
        if (!index.isInt() || index.asInt() < 0 || static_cast<size_t>(index.asInt()) >= out.variants.size()) {
          in.fail(in.pathOf("clusters") + "." + cluster, "expected an index into variants");
          continue;
        }
        out.clusters[cluster] = index.asInt();
      }
    }
    in.finish();
  }
  if (!problems.empty()) {
    std::string message;
    for (const auto& p : problems) {
      message += (message.empty() ? "" : "; ") + p;
    }
    return fail(ErrorKind::kInvalid, message);
  }
  return out;
}

std::string variantsObjectName(std::string_view encoded) {
  return std::string(kVariantsObjectPrefix) + sha256Hex(encoded);
}

}  // namespace flotilla::events

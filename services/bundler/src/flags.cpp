#include "flotilla/bundler/flags.h"

#include <cctype>
#include <cstring>
#include <functional>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/render/external_renderers.h"
#include "flotilla/service/hub.h"

namespace flotilla::bundler {
namespace {

Result<uint64_t> parseNumber(std::string_view digits) {
  if (digits.empty() || digits.size() > 18) {
    return fail(ErrorKind::kInvalid, "expected a number");
  }
  uint64_t value = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      return fail(ErrorKind::kInvalid, "expected a number");
    }
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return value;
}

}  // namespace

std::map<std::string, std::string> bundlerFlags() {
  return {
      {"work-dir", "directory for per-commit checkouts, each removed after use (default /var/lib/flotilla/bundler)"},
      {"workers", "commits rendered in parallel (default 2)"},
      {"render-parallelism", "bundles of one commit rendered in parallel (default 4)"},
      {"max-file-bytes", "largest single file a bundle may have, e.g. 16MiB (default 16MiB)"},
      {"max-manifest-bytes", "largest rendered manifest of one bundle, e.g. 256MiB (default 256MiB)"},
      {"render-timeout", "time limit of one helm/kustomize run (default 60s)"},
      {"commit-budget",
       "time from a commit's start to the start of its last bundle's render; a bundle that would start later is "
       "not rendered and the commit is rejected (default 20m)"},
      {"helm-binary", "helm executable for Helm bundles (default: helm on PATH; \"none\" disables Helm)"},
      {"kustomize-binary",
       "kustomize executable for kustomize bundles (default: kustomize on PATH; \"none\" disables kustomize)"},
      {"retry-max", "longest delay before a failed commit is retried (default 60s)"},
      {"gc-grace",
       "keep an unreferenced manifest this long after its last write or reuse (default 1h; docs/pipeline.md "
       "\"Garbage collection\")"},
      {"gc-interval", "time between garbage collection passes of the manifests store (default 10m)"},
      {"ack-wait",
       "how long JetStream waits before redelivering a commit the bundler did not acknowledge, i.e. after the "
       "bundler died holding it (default 30s; in-progress acks cover long renders)"},
      {"max-deliveries", "deliveries of a failing commit before it is terminated and reported (default 10)"},
      {"chart-cache-dir",
       "where Helm charts pulled from repositories are cached (default <work-dir>/chart-cache; \"none\" disables)"},
      {"credentials-dir",
       "directory of Secret-shaped credentials for helmSecretName, <dir>/<workspace>/<name> (same layout as the "
       "poller's; default none)"},
  };
}

Result<std::chrono::milliseconds> parseInterval(std::string_view text) {
  std::string value = trim(text);
  struct Unit {
    const char* suffix;
    int64_t ms;
  };
  for (const Unit& unit : {Unit{"ms", 1}, Unit{"s", 1000}, Unit{"m", 60000}, Unit{"h", 3600000}}) {
    if (endsWith(value, unit.suffix)) {
      auto number = parseNumber(std::string_view(value).substr(0, value.size() - std::strlen(unit.suffix)));
      if (number.ok()) {
        return std::chrono::milliseconds(static_cast<int64_t>(*number) * unit.ms);
      }
    }
  }
  auto seconds = parseNumber(value);
  if (!seconds.ok()) {
    return fail(ErrorKind::kInvalid, "\"" + value + "\" is not a duration (e.g. 30s, 2m, 500ms)");
  }
  return std::chrono::milliseconds(static_cast<int64_t>(*seconds) * 1000);
}

Result<BundlerOptions> bundlerOptionsFrom(const service::Config& config) {
  BundlerOptions options;
  options.handler.work_dir = config.get("work-dir", "/var/lib/flotilla/bundler");
  options.workers = static_cast<int>(config.getInt("workers", 2));
  if (options.workers < 1 || options.workers > 256) {
    return fail(ErrorKind::kInvalid, "--workers must be between 1 and 256");
  }
  options.max_deliveries = config.getInt("max-deliveries", service::kDefaultMaxDeliveries);
  if (options.max_deliveries < 1) {
    return fail(ErrorKind::kInvalid, "--max-deliveries must be at least 1");
  }
  options.handler.render_parallelism = static_cast<int>(config.getInt("render-parallelism", 4));
  if (options.handler.render_parallelism < 1 || options.handler.render_parallelism > 64) {
    return fail(ErrorKind::kInvalid, "--render-parallelism must be between 1 and 64");
  }
  struct SizeFlag {
    const char* name;
    uint64_t* target;
  };
  for (auto [name, target] : {SizeFlag{"max-file-bytes", &options.handler.limits.max_file_bytes},
                              SizeFlag{"max-manifest-bytes", &options.handler.limits.max_output_bytes}}) {
    std::string text = config.get(name);
    if (text.empty()) {
      continue;
    }
    auto size = service::parseByteSize(text);
    if (!size.ok() || *size == 0) {
      return fail(ErrorKind::kInvalid, "--" + std::string(name) + ": " +
                                           (size.ok() ? std::string("must be more than 0") : size.error().message));
    }
    *target = static_cast<uint64_t>(*size);
  }
  struct IntervalFlag {
    const char* name;
    std::chrono::milliseconds* target;
  };
  for (auto [name, target] :
       {IntervalFlag{"render-timeout", &options.handler.limits.timeout},
        IntervalFlag{"commit-budget", &options.handler.commit_budget},
        IntervalFlag{"retry-max", &options.handler.retry_max}, IntervalFlag{"ack-wait", &options.ack_wait},
        IntervalFlag{"gc-grace", &options.gc_grace}, IntervalFlag{"gc-interval", &options.gc_interval}}) {
    std::string text = config.get(name);
    if (text.empty()) {
      continue;
    }
    auto interval = parseInterval(text);
    if (!interval.ok() || interval->count() <= 0) {
      return fail(ErrorKind::kInvalid,
                  "--" + std::string(name) + ": " +
                      (interval.ok() ? std::string("must be positive") : interval.error().message));
    }
    *target = *interval;
  }
  return options;
}

render::RendererBinaries rendererBinariesFrom(const service::Config& config) {
  render::RendererBinaries binaries;
  binaries.helm = config.get("helm-binary", "helm");
  binaries.kustomize = config.get("kustomize-binary", "kustomize");
  if (binaries.helm == "none") {
    binaries.helm.clear();
  }
  if (binaries.kustomize == "none") {
    binaries.kustomize.clear();
  }
  binaries.chart_cache_dir =
      config.get("chart-cache-dir", config.get("work-dir", "/var/lib/flotilla/bundler") + "/chart-cache");
  if (binaries.chart_cache_dir == "none") {
    binaries.chart_cache_dir.clear();
  }
  binaries.credentials_dir = config.get("credentials-dir");
  return binaries;
}

}  // namespace flotilla::bundler

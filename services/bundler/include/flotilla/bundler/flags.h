// flotilla/bundler/flags.h
//
// The bundler's command-line flags (besides the common --nats-url, --http-addr, --log-level, ...) and how they
// become BundlerOptions.
#pragma once

#include <map>
#include <string>

#include "flotilla/bundler/bundler.h"
#include "flotilla/core/result.h"
#include "flotilla/service/runtime.h"

namespace flotilla::bundler {

//! Flag name -> help text.
std::map<std::string, std::string> bundlerFlags();

//! What main() needs besides the options: where the external renderers are.
struct RendererBinaries {
  std::string helm;             //!< "" = Helm bundles are reported as unsupported
  std::string kustomize;        //!< "" = kustomize bundles are reported as unsupported
  std::string chart_cache_dir;  //!< --chart-cache-dir (default <work-dir>/chart-cache)
  std::string credentials_dir;  //!< --credentials-dir: helmSecretName secrets
};

//! Options from flags; kInvalid naming the flag when a value is malformed.
Result<BundlerOptions> bundlerOptionsFrom(const service::Config& config);
//! The renderer binaries from flags (--helm-binary, --kustomize-binary; "none" disables one).
RendererBinaries rendererBinariesFrom(const service::Config& config);

//! Parses "30s", "2m", "500ms", "1h" or a plain number of seconds.
Result<std::chrono::milliseconds> parseInterval(std::string_view text);
//! Parses "16MiB", "512KiB", "1GiB", "100MB" or a plain number of bytes.
Result<uint64_t> parseByteSize(std::string_view text);

}  // namespace flotilla::bundler

namespace flotilla::bundler {

//! The renderers for these binaries: raw always, Helm and kustomize when their binary is set and found (a missing
//! binary is logged; its bundles then get error events rather than being retried forever).
std::shared_ptr<const RendererSet> makeRenderers(const RendererBinaries& binaries);

}  // namespace flotilla::bundler

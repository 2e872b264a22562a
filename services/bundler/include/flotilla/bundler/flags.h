// flotilla/bundler/flags.h
//
// The bundler's command-line flags (besides the common --nats-url, --http-addr, --log-level, ...) and how they
// become BundlerOptions.
#pragma once

#include <map>
#include <string>

#include "flotilla/bundler/bundler.h"
#include "flotilla/core/result.h"
#include "flotilla/render/external_renderers.h"
#include "flotilla/service/runtime.h"

namespace flotilla::bundler {

//! Flag name -> help text.
std::map<std::string, std::string> bundlerFlags();

//! Options from flags; kInvalid naming the flag when a value is malformed.
Result<BundlerOptions> bundlerOptionsFrom(const service::Config& config);
//! The renderer binaries from flags (--helm-binary, --kustomize-binary; "none" disables one).
render::RendererBinaries rendererBinariesFrom(const service::Config& config);

//! Parses "30s", "2m", "500ms", "1h" or a plain number of seconds.
Result<std::chrono::milliseconds> parseInterval(std::string_view text);

}  // namespace flotilla::bundler

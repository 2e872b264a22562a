// flotilla/agent/flags.h
//
// The agent's command-line flags (besides the common ones of service::Config: --nats-url, --http-addr,
// --log-level, --workspace, NATS credentials) and their translation into AgentOptions, kept out of main.cpp so
// they can be tested.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "flotilla/agent/agent.h"
#include "flotilla/core/result.h"
#include "flotilla/service/runtime.h"

namespace flotilla::agent {

//! Flag name -> help text, for service::Config::parse.
std::map<std::string, std::string> agentFlags();
//! --parallel-bundles: empty is the default (4); anything but a whole number from 1 to 64 is kInvalid naming the flag.
Result<int> parseParallelBundles(std::string_view text);
//! AgentOptions from parsed flags; a missing --cluster-name or a malformed value is kInvalid naming the flag.
Result<AgentOptions> agentOptionsFrom(const service::Config& config);

}  // namespace flotilla::agent

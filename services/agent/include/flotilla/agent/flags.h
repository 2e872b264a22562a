// flotilla/agent/flags.h
//
// The agent's command-line flags (besides the common ones of service::Config: --nats-url, --http-addr,
// --log-level, --workspace, NATS credentials) and their translation into AgentOptions, kept out of main.cpp so
// they can be tested.
#pragma once

#include <map>
#include <string>

#include "flotilla/agent/agent.h"
#include "flotilla/core/result.h"
#include "flotilla/service/runtime.h"

namespace flotilla::agent {

//! Flag name -> help text, for service::Config::parse.
std::map<std::string, std::string> agentFlags();
//! AgentOptions from parsed flags; a missing --cluster-name or a malformed value is kInvalid naming the flag.
Result<AgentOptions> agentOptionsFrom(const service::Config& config);

}  // namespace flotilla::agent

// flotilla-poller: watches GitRepos, polls git, publishes commit events. Wiring only; see README.md.
#include <cstdio>
#include <iostream>
#include <memory>

#include "flotilla/core/log.h"
#include "flotilla/model/duration.h"
#include "flotilla/poller/poller.h"
#include "flotilla/service/hub.h"
#include "flotilla/service/runtime.h"

namespace {

using flotilla::Result;
namespace log = flotilla::log;

std::map<std::string, std::string> pollerFlags() {
  return {
      {"data-dir", "directory for the git mirrors (default /var/lib/flotilla/poller)"},
      {"workers", "concurrent mirror syncs (default 4)"},
      {"credentials-dir", "directory of git secrets named by GitRepo clientSecretName (see README)"},
      {"git-timeout", "limit of one ls-remote or fetch, Go duration (default 2m)"},
      {"max-backoff", "cap of the retry delay after failures, Go duration (default 5m)"},
      {"allow-local-repos", "accept file:// and local-path repos (tests and demos only; default false)"},
      {"max-per-host", "mirror syncs (git connections) at once against one git host (default 4)"},
      {"webhook-addr", "listen address of the webhook receiver, host:port (default: off; port 0 = any free port)"},
      {"webhook-secret", "name of the poller-wide webhook secret in --credentials-dir (default: none)"},
      {"webhook-max-body", "largest webhook payload in bytes; larger gets 413 (default 10485760)"},
      {"webhook-coalesce", "delay after a push before polling, so a burst is one sync, Go duration (default 100ms)"},
      {"align-phases", "TEST/BENCHMARK ONLY: poll every GitRepo on the same grid, no phase spread (default false)"},
  };
}

Result<flotilla::poller::PollerOptions> optionsFrom(const flotilla::service::Config& config) {
  flotilla::poller::PollerOptions options;
  options.data_dir = config.get("data-dir", options.data_dir);
  options.workers = static_cast<int>(config.getInt("workers", options.workers));
  options.credentials_dir = config.get("credentials-dir");
  options.allow_local = config.getBool("allow-local-repos");
  options.max_per_host = static_cast<int>(config.getInt("max-per-host", options.max_per_host));
  options.webhook_secret = config.get("webhook-secret");
  options.webhook_max_body =
      static_cast<size_t>(config.getInt("webhook-max-body", static_cast<int64_t>(options.webhook_max_body)));
  options.align_phases = config.getBool("align-phases");
  if (const std::string addr = config.get("webhook-addr"); !addr.empty()) {
    const auto colon = addr.rfind(':');
    int port = -1;
    if (colon != std::string::npos) {
      try {
        port = std::stoi(addr.substr(colon + 1));
      } catch (...) {
        port = -1;
      }
    }
    if (colon == std::string::npos || colon == 0 || port < 0 || port > 65535) {
      return flotilla::fail(flotilla::ErrorKind::kInvalid,
                            "--webhook-addr must be host:port (port 0 = any free port), got \"" + addr + "\"");
    }
    std::string host = addr.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    options.webhook_address = host;
    options.webhook_port = static_cast<uint16_t>(port);
  }
  if (const std::string text = config.get("webhook-coalesce"); !text.empty()) {
    auto parsed = flotilla::model::parseDuration(text);
    if (!parsed.ok() || parsed->count() < 0) {
      return flotilla::fail(flotilla::ErrorKind::kInvalid,
                            "--webhook-coalesce must be a duration like 100ms or 1s, got \"" + text + "\"");
    }
    options.webhook_coalesce = *parsed;
  }
  for (auto [flag, target] : {std::pair{"git-timeout", &options.git_timeout}, {"max-backoff", &options.max_backoff}}) {
    const std::string text = config.get(flag);
    if (text.empty()) {
      continue;
    }
    auto parsed = flotilla::model::parseDuration(text);
    if (!parsed.ok() || parsed->count() <= 0) {
      return flotilla::fail(
          flotilla::ErrorKind::kInvalid,
          std::string("--") + flag + " must be a positive duration like 30s or 2m, got \"" + text + "\"");
    }
    *target = *parsed;
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  auto config = flotilla::service::Config::parse(argc, argv, pollerFlags());
  if (!config.ok()) {
    std::fprintf(stderr, "flotilla-poller: %s\n", config.error().describe().c_str());
    return 1;
  }
  if (config->helpRequested()) {
    std::cout << config->usage("flotilla-poller");
    return 0;
  }
  auto options = optionsFrom(*config);
  if (!options.ok()) {
    std::fprintf(stderr, "flotilla-poller: %s\n", options.error().describe().c_str());
    return 1;
  }
  auto runtime = flotilla::service::Runtime::start("poller", *config);
  if (!runtime.ok()) {
    log::error("cannot start the runtime", {{"error", runtime.error().describe()}});
    return 1;
  }
  auto& rt = **runtime;
  auto hub = flotilla::service::connectHub(flotilla::service::connectOptionsFrom(*config, "poller"),
                                           flotilla::service::HubAccess::kProvision, &rt.metrics());
  if (!hub.ok()) {
    log::error("cannot connect to the hub", {{"error", hub.error().describe()}});
    return 1;
  }
  auto poller = flotilla::poller::Poller::create(*options, *hub, rt.metrics());
  if (!poller.ok()) {
    log::error("cannot create the poller", {{"error", poller.error().describe()}});
    return 1;
  }
  // Shared with the readiness check, which the runtime's HTTP server may call until the runtime is gone.
  std::shared_ptr<flotilla::poller::Poller> shared = std::move(poller).value();
  auto& p = *shared;
  rt.addReadinessCheck("poller", [shared](std::string& why) { return shared->ready(why); });
  if (auto started = p.start(); !started.ok()) {
    log::error("cannot start the poller", {{"error", started.error().describe()}});
    return 1;
  }
  if (p.webhookPort() != 0) {
    // Tests and scripts that asked for port 0 read the real one from this line.
    std::printf("webhook listening on %s:%u\n", options->webhook_address.c_str(), p.webhookPort());
    std::fflush(stdout);
  }
  rt.waitForShutdown();
  log::info("shutting down");
  p.stop();
  return 0;
}

// flotilla-poller: watches GitRepos, polls git, publishes commit events. Wiring only; see README.md.
#include "flotilla/service/main.h"

#include <cstdio>
#include <memory>

#include "flotilla/core/log.h"
#include "flotilla/model/duration.h"
#include "flotilla/poller/poller.h"
#include "flotilla/service/hub.h"

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
      {"webhook-secret", "poller-wide webhook secret, <workspace>/<name> in --credentials-dir (default: none)"},
      {"webhook-max-body", "largest webhook payload in bytes; larger gets 413 (default 10485760)"},
      {"webhook-max-connections", "webhook connections at once; one more gets 503 (default 64, 0 = no cap)"},
      {"webhook-rate", "webhook requests per second per source address; over it 429 (default 10, 0 = no limit)"},
      {"webhook-burst",
       "webhook requests a source address may send at once before --webhook-rate applies (default 20)"},
      {"webhook-coalesce",
       "delay after a push before polling, so a burst is one sync, Go duration (default 0: at once)"},
      {"gc-grace",
       "keep an unreferenced source archive this long after its last write or reuse, Go duration (default 1h; "
       "docs/pipeline.md \"Garbage collection\")"},
      {"gc-interval", "time between garbage collection passes of the sources store, Go duration (default 10m)"},
      {"align-phases", "TEST/BENCHMARK ONLY: poll every GitRepo on the same grid, no phase spread (default false)"},
  };
}

//! The webhook receiver's flags: its address, connection cap, rate limit and coalescing window.
flotilla::Status webhookOptionsFrom(const flotilla::service::Config& config, flotilla::poller::PollerOptions& options) {
  const int64_t max_connections =
      config.getInt("webhook-max-connections", static_cast<int64_t>(options.webhook_max_connections));
  if (max_connections < 0) {
    return flotilla::fail(flotilla::ErrorKind::kInvalid, "--webhook-max-connections must not be negative");
  }
  options.webhook_max_connections = static_cast<size_t>(max_connections);
  for (auto [flag, target] :
       {std::pair{"webhook-rate", &options.webhook_rate}, {"webhook-burst", &options.webhook_burst}}) {
    const std::string text = config.get(flag);
    if (text.empty()) {
      continue;
    }
    size_t used = 0;
    double value = -1;
    try {
      value = std::stod(text, &used);
    } catch (...) {
      used = 0;
    }
    if (used != text.size() || !(value >= 0)) {
      return flotilla::fail(flotilla::ErrorKind::kInvalid,
                            std::string("--") + flag + " must be a non-negative number, got \"" + text + "\"");
    }
    *target = value;
  }
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
  return flotilla::okStatus();
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
  FLOTILLA_TRY(webhookOptionsFrom(config, options));
  for (auto [flag, target] : {std::pair{"git-timeout", &options.git_timeout},
                              {"max-backoff", &options.max_backoff},
                              {"gc-grace", &options.gc_grace},
                              {"gc-interval", &options.gc_interval}}) {
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

flotilla::service::StopService startPoller(const flotilla::service::Config& config,
                                           flotilla::service::Runtime& runtime) {
  using flotilla::service::startupFailed;
  auto options = optionsFrom(config);
  if (!options.ok()) {
    return startupFailed("invalid flags", options.error());
  }
  auto hub = flotilla::service::connectProvisioningHub(config, runtime, "poller");
  if (!hub) {
    return {};
  }
  auto created = flotilla::poller::Poller::create(*options, *hub, runtime.metrics());
  if (!created.ok()) {
    return startupFailed("cannot create the poller", created.error());
  }
  std::shared_ptr<flotilla::poller::Poller> poller = std::move(created).value();
  runtime.addReadinessCheck("poller", poller);
  if (auto started = poller->start(); !started.ok()) {
    return startupFailed("cannot start the poller", started.error());
  }
  if (poller->webhookPort() != 0) {
    // Tests and scripts that asked for port 0 read the real one from this line.
    std::printf("webhook listening on %s:%u\n", options->webhook_address.c_str(), poller->webhookPort());
    std::fflush(stdout);
  }
  return [poller] {
    log::info("shutting down");
    poller->stop();
  };
}

}  // namespace

int main(int argc, char** argv) {
  auto flags = pollerFlags();
  flags.merge(flotilla::service::storeFlags());
  return flotilla::service::runService("poller", flags, argc, argv, startPoller);
}

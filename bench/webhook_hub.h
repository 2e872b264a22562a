// A hub for the benchmarks that push webhooks: its poller's webhook listener on a free port, with the generic
// provider's secret in its credentials directory (bench_commit_to_ready, bench_flux).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "flotilla/core/util.h"
#include "flotilla/harness/local_port.h"
#include "hub_fixture.h"

namespace flotilla::bench {

//! A hub whose poller listens for webhooks on `port`, with `secret` as the generic provider's secret of the
//! credential named `credential` in `workspace` (a GitRepo's `webhookSecret: <credential>`).
struct WebhookHub {
  std::unique_ptr<e2e::Hub> hub;
  int port = 0;
};

//! Starts a hub with `options` plus the poller's webhook listener on a free port and its credentials directory.
inline Result<WebhookHub> startWebhookHub(e2e::HubOptions options, const std::string& workspace,
                                          const std::string& credential, const std::string& secret) {
  auto port = harness::freeTcpPort();
  FLOTILLA_TRY(port);
  auto credentials = makeTempDir("bench-creds");
  FLOTILLA_TRY(credentials);
  // Credentials are per workspace: the secret a GitRepo's webhookSecret names lives in its workspace's directory.
  std::error_code ec;
  std::filesystem::create_directories(*credentials + "/" + workspace, ec);
  if (ec) {
    return fail(ErrorKind::kInternal, "cannot create " + *credentials + "/" + workspace + ": " + ec.message());
  }
  FLOTILLA_TRY(writeFile(*credentials + "/" + workspace + "/" + credential + ".yaml", "generic: " + secret + "\n"));
  options.services["poller"].flags = {"--webhook-addr", "127.0.0.1:" + std::to_string(*port), "--credentials-dir",
                                      *credentials};
  auto hub = e2e::Hub::start(std::move(options));
  FLOTILLA_TRY(hub);
  return WebhookHub{.hub = std::move(*hub), .port = *port};
}

}  // namespace flotilla::bench

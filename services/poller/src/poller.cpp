// The poller's public face: create (options, data dir), start (threads, webhook receiver), stop (drain), ready.
// The threads' work lives in spec_watch.cpp, dispatch.cpp, completions.cpp, webhook_receiver.cpp and
// status_writer.cpp (see poller_core.h).
#include "flotilla/poller/poller.h"

#include <filesystem>

#include "flotilla/core/log.h"
#include "flotilla/poller/credentials_store.h"
#include "flotilla/secrets/secret_store.h"
#include "flotilla/service/runtime.h"
#include "poller_core.h"

namespace flotilla::poller {

Poller::Poller(std::shared_ptr<Core> core) : core_(std::move(core)) {}

Poller::~Poller() {
  stop();
}

Result<std::unique_ptr<Poller>> Poller::create(PollerOptions options, const service::Hub& hub, Metrics& metrics) {
  if (options.max_per_host < 1) {
    return fail(ErrorKind::kInvalid, "--max-per-host must be at least 1", "Poller::create");
  }
  if (options.workers < 1) {
    return fail(ErrorKind::kInvalid, "--workers must be at least 1", "Poller::create");
  }
  if (options.data_dir.empty()) {
    return fail(ErrorKind::kInvalid, "--data-dir must not be empty", "Poller::create");
  }
  if (!options.webhook_secret.empty() && !splitWebhookSecretName(options.webhook_secret)) {
    return fail(ErrorKind::kInvalid,
                "--webhook-secret must be <workspace>/<name> (credentials are per workspace), got \"" +
                    options.webhook_secret + "\"",
                "Poller::create");
  }
  // Secrets are per workspace; a credentials dir in the old flat layout would make every secret "not found".
  FLOTILLA_TRY(secrets::checkLayout(options.credentials_dir));
  if (!hub.gitrepos || !hub.status || !hub.sources || !hub.js) {
    return fail(ErrorKind::kInvalid, "the hub lacks the gitrepos/status buckets or the sources store",
                "Poller::create");
  }
  auto core = std::make_shared<Core>(std::move(options), hub, metrics);
  const PollerOptions& opts = core->options;
  core->mirrors_dir = opts.data_dir + "/mirrors";
  core->settings.credentials_dir = opts.credentials_dir;
  core->settings.scratch_dir = opts.data_dir + "/tmp";
  core->settings.git_timeout = opts.git_timeout;
  core->settings.max_source_bytes = opts.max_source_bytes;
  core->settings.allow_local = opts.allow_local;
  core->store_full = std::make_unique<service::StoreFullReporter>(metrics);
  core->gc = std::make_unique<service::ObjectGc>(
      hub.sources, [hub] { return service::sourceReferences(hub); }, metrics,
      service::GcOptions{.grace = opts.gc_grace, .interval = opts.gc_interval, .clock = opts.gc_clock});
  core->public_events = std::make_unique<service::PublicEvents>(hub.js, metrics);
  core->bus = SyncBus{.js = hub.js,
                      .sources = hub.sources,
                      .status = hub.status,
                      .gc = core->gc.get(),
                      .store_full = core->store_full.get(),
                      .public_events = core->public_events.get()};
  removeAll(core->settings.scratch_dir);  // leftovers of a crash
  std::error_code ec;
  std::filesystem::create_directories(core->mirrors_dir, ec);
  if (!ec) {
    std::filesystem::create_directories(core->settings.scratch_dir, ec);
  }
  if (ec) {
    return fail(ErrorKind::kPermanent, "cannot create " + opts.data_dir + ": " + ec.message(), "Poller::create");
  }
  return std::unique_ptr<Poller>(new Poller(std::move(core)));
}

Status Poller::start() {
  Core& core = *core_;
  {
    std::lock_guard lock(core.mutex);
    if (core.started) {
      return fail(ErrorKind::kConflict, "the poller is already started", "Poller::start");
    }
    core.started = true;
  }
  if (!core.options.webhook_address.empty()) {
    if (auto started = core.startWebhookServer(); !started.ok()) {
      std::lock_guard lock(core.mutex);
      core.started = false;
      return started;
    }
  }
  core.writer = std::thread([&core] { core.writeLoop(); });
  core.deleter = std::thread([&core] { core.deleteLoop(); });
  core.scheduler = std::thread([&core] { core.scheduleLoop(); });
  core.watcher = std::thread([&core] { core.watchLoop(); });
  core.gc->start();
  log::info("poller started", {{"data_dir", core.options.data_dir},
                               {"workers", core.options.workers},
                               {"git_timeout_ms", static_cast<int64_t>(core.options.git_timeout.count())}});
  return {};
}

void Poller::stop() {
  Core& core = *core_;
  {
    std::lock_guard lock(core.mutex);
    if (!core.started || core.stopped) {
      return;
    }
    core.stopped = true;
    core.stopping = true;
  }
  core.wake.notify_all();
  core.deletions_cv.notify_all();
  core.gc->stop();
  if (core.webhook_server) {
    core.webhook_server->stop();
  }
  if (core.watcher.joinable()) {
    core.watcher.join();
  }
  if (core.scheduler.joinable()) {
    core.scheduler.join();
  }
  if (core.deleter.joinable()) {
    core.deleter.join();  // deletions not published yet keep their status: the next start redoes them
  }
  {
    // Let running syncs finish (they stop after their current GitRepo) and record what they published; git
    // calls still running at the deadline are left behind like the watchdog would.
    std::unique_lock lock(core.mutex);
    const auto deadline = SteadyClock::now() + kStopWait;
    while (true) {
      core.processCompletions(nowEpochMillis());
      if (core.active == 0) {
        break;
      }
      if (SteadyClock::now() >= deadline) {
        for (auto& job : core.running) {
          std::lock_guard job_lock(job->mutex);
          if (!job->abandoned && job->in_git) {
            core.abandon(*job, nowEpochMillis());
          }
        }
      }
      core.wake.wait_for(lock, Millis(100));
    }
  }
  {
    std::lock_guard status_lock(core.status_mutex);
    core.status_stop = true;
  }
  core.status_cv.notify_all();
  if (core.writer.joinable()) {
    core.writer.join();
  }
  log::info("poller stopped", {{"stuck_git_calls", core.stuck}});
}

Result<service::GcPass> Poller::collectSources() {
  return core_->gc->runPass();
}

uint16_t Poller::webhookPort() const {
  return core_->webhook_server ? core_->webhook_server->port() : 0;
}

bool Poller::ready(std::string& why) const {
  const bool connected = core_->hub.connection && core_->hub.connection->connected();
  std::lock_guard lock(core_->mutex);
  return service::readyWhen(
      why, {{connected, "not connected to NATS"}, {core_->initial_loaded, "initial GitRepos not loaded yet"}});
}

}  // namespace flotilla::poller

#include "flotilla/service/runtime.h"

#include <cstdlib>
#include <sstream>

#include <signal.h>

#include "flotilla/core/ascii.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/service/process_metrics.h"

namespace flotilla::service {

namespace {

std::string envName(const std::string& flag) {
  std::string out = "FLOTILLA_";
  for (char c : flag) {
    out.push_back(c == '-' ? '_' : asciiUpper(c));
  }
  return out;
}

}  // namespace

std::map<std::string, std::string> commonFlags() {
  return {
      {"http-addr", "address:port for /metrics, /healthz, /readyz (default 127.0.0.1:0)"},
      {"log-level", "debug|info|warn|error (default info)"},
      {"nats-url", "NATS server URL(s), comma-separated (default nats://127.0.0.1:4222)"},
      {"nats-creds", "NATS credentials file"},
      {"nats-user", "NATS user"},
      {"nats-password", "NATS password"},
      {"nats-ca", "CA file to verify the NATS server's TLS certificate"},
      {"nats-cert", "client certificate for NATS TLS"},
      {"nats-key", "client key for NATS TLS"},
      {"nats-inbox-prefix",
       "prefix of the reply subjects this process subscribes to (default _INBOX); restricted identities may only "
       "use their own (the agent derives _INBOX.agent-<cluster> from its credentials)"},
      {"workspace", "Fleet workspace (namespace of GitRepos; default fleet-default)"},
  };
}

bool readyWhen(std::string& why, std::initializer_list<ReadyCondition> conditions) {
  for (const auto& condition : conditions) {
    if (!condition.met) {
      why = condition.why_not;
      return false;
    }
  }
  return true;
}

Result<Config> Config::parse(int argc, const char* const* argv, std::map<std::string, std::string> known) {
  Config config;
  for (auto& [name, help] : commonFlags()) {
    known.emplace(name, help);
  }
  config.known_ = std::move(known);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      config.help_ = true;
      continue;
    }
    if (!startsWith(arg, "--")) {
      return fail(ErrorKind::kInvalid, "unexpected argument \"" + arg + "\"");
    }
    std::string name = arg.substr(2);
    std::string value;
    auto eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < argc && !startsWith(argv[i + 1], "--")) {
      value = argv[++i];
    } else {
      value = "true";
    }
    if (!config.known_.contains(name)) {
      return fail(ErrorKind::kInvalid, "unknown flag --" + name);
    }
    config.values_[name] = value;
  }
  return config;
}

std::string Config::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  if (it != values_.end()) {
    return it->second;
  }
  return envOr(envName(name).c_str(), fallback);
}

int64_t Config::getInt(const std::string& name, int64_t fallback) const {
  std::string value = get(name);
  if (value.empty()) {
    return fallback;
  }
  try {
    return std::stoll(value);
  } catch (...) {
    log::warn("ignoring non-numeric flag value", {{"flag", name}, {"value", value}});
    return fallback;
  }
}

bool Config::getBool(const std::string& name, bool fallback) const {
  std::string value = get(name);
  if (value.empty()) {
    return fallback;
  }
  return value == "true" || value == "1" || value == "yes";
}

std::string Config::usage(const std::string& program) const {
  std::ostringstream out;
  out << "usage: " << program << " [flags]\n\nEach flag can also be set as FLOTILLA_<FLAG> in the environment.\n\n";
  for (const auto& [name, help] : known_) {
    out << "  --" << name << "\n      " << help << "\n";
  }
  return out.str();
}

Runtime::Runtime(std::string service, std::string http_address)
    : service_(service), http_address_(std::move(http_address)), metrics_(std::move(service)) {
  metrics_.addCollectable(std::make_shared<ProcessCollector>(service_, buildVersion()));
}

Runtime::~Runtime() {
  if (http_) {
    http_->stop();
  }
}

Result<std::unique_ptr<Runtime>> Runtime::start(const std::string& service, const Config& config) {
  // Block the shutdown signals before any thread starts, so every thread inherits the mask and only
  // waitForShutdown() receives them (no async-signal-safety concerns in handlers).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  log::setService(service);
  log::setLevel(config.get("log-level", "info"));
  std::unique_ptr<Runtime> runtime(new Runtime(service, config.get("http-addr", "127.0.0.1:0")));
  FLOTILLA_TRY(runtime->serveHttp({}));
  log::info("service started", {{"http_port", runtime->httpPort()}});
  return runtime;
}

Status Runtime::serveHttp(const std::map<std::string, http::Handler>& extra) {
  if (http_) {
    http_->stop();
    http_.reset();
  }
  auto colon = http_address_.rfind(':');
  if (colon == std::string::npos) {
    return fail(ErrorKind::kInvalid, "--http-addr must be address:port, got \"" + http_address_ + "\"");
  }
  http::ServerOptions options;
  options.address = http_address_.substr(0, colon);
  options.port = static_cast<uint16_t>(std::atoi(http_address_.c_str() + colon + 1));
  auto routes = http::standardRoutes(metrics_, [this](std::string& why) {
    std::lock_guard lock(checks_mutex_);
    // Not ready until the service has said what "ready" means: a process that has only started its HTTP
    // server must not receive traffic or count as rolled out.
    if (checks_.empty()) {
      why = "starting: no readiness check registered yet";
      return false;
    }
    for (auto& [name, check] : checks_) {
      std::string reason;
      if (!check(reason)) {
        why = name;
        why += ": ";
        why += reason;
        return false;
      }
    }
    return true;
  });
  for (const auto& [key, handler] : extra) {
    routes[key] = handler;
  }
  auto server = http::Server::start(options, std::move(routes));
  if (!server.ok()) {
    return fail(server.error());
  }
  http_ = std::move(server).value();
  // Keep the chosen port on restart (webhook routes added later must not move the endpoint).
  http_address_ = options.address + ":" + std::to_string(http_->port());
  return {};
}

uint16_t Runtime::httpPort() const {
  return http_ ? http_->port() : 0;
}

void Runtime::addReadinessCheck(std::string name, std::function<bool(std::string& why)> check) {
  std::lock_guard lock(checks_mutex_);
  checks_.emplace_back(std::move(name), std::move(check));
}

void Runtime::addReadinessCheck(std::string name, std::shared_ptr<const Component> component) {
  addReadinessCheck(std::move(name),
                    [component = std::move(component)](std::string& why) { return component->ready(why); });
}

void Runtime::waitForShutdown() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  int received = 0;
  sigwait(&signals, &received);
  stopping_ = true;
  log::info("shutting down", {{"signal", received == SIGTERM ? "SIGTERM" : "SIGINT"}});
}

void Runtime::requestShutdown() {
  stopping_ = true;
  kill(getpid(), SIGTERM);
}

}  // namespace flotilla::service

#include "flotilla/harness/nats_server.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"

namespace flotilla::harness {
namespace {

constexpr int kStartAttempts = 4;

// Reads until `done(buffer)` or the deadline; returns what arrived.
template <typename Done>
std::string readUntil(int fd, std::chrono::milliseconds timeout, Done done) {
  std::string buffer;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char chunk[4096];
  while (!done(buffer)) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      break;
    }
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) {
      break;
    }
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n <= 0) {
      break;
    }
    buffer.append(chunk, static_cast<size_t>(n));
  }
  return buffer;
}

// The client port greets every connection with an INFO line once the server accepts clients.
bool clientPortReady(int port) {
  int fd = connectLocal(port);
  if (fd < 0) {
    return false;
  }
  std::string got = readUntil(fd, std::chrono::milliseconds(500),
                              [](const std::string& b) { return b.find("\r\n") != std::string::npos; });
  ::close(fd);
  return startsWith(got, "INFO ");
}

// GET /healthz on the monitor port: 200 once the server (and JetStream, when enabled) is healthy.
bool healthzOk(int monitor_port, bool js_enabled_only = true) {
  int fd = connectLocal(monitor_port);
  if (fd < 0) {
    return false;
  }
  const std::string_view request =
      js_enabled_only ? "GET /healthz?js-enabled-only=true HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                      : "GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  bool sent = ::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size());
  std::string got;
  if (sent) {
    got = readUntil(fd, std::chrono::milliseconds(500),
                    [](const std::string& b) { return b.find("\r\n") != std::string::npos; });
  }
  ::close(fd);
  return startsWith(got, "HTTP/1.") && got.find(" 200 ") != std::string::npos;
}

bool addressInUse(const std::string& log) {
  return log.find("address already in use") != std::string::npos;
}

void replaceAll(std::string& text, std::string_view from, std::string_view to) {
  for (size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size())) {
    text.replace(pos, from.size(), to);
  }
}

}  // namespace

std::string defaultNatsServerBinary() {
  std::string source = envOr("FLOTILLA_SOURCE_DIR", FLOTILLA_SOURCE_DIR);
  return envOr("FLOTILLA_TOOLS_DIR", source + "/.tools/bin") + "/nats-server";
}

std::string uniqueName(std::string_view prefix) {
  return std::string(prefix) + "_" + randomHex(6);
}

Result<std::unique_ptr<NatsServer>> NatsServer::start(NatsServerOptions options) {
  if (options.binary.empty()) {
    options.binary = defaultNatsServerBinary();
  }
  if (::access(options.binary.c_str(), X_OK) != 0) {
    return fail(ErrorKind::kNotFound,
                options.binary +
                    " is missing or not executable: run scripts/setup --tools (it builds the pinned "
                    "nats-server into .tools/bin), or point FLOTILLA_TOOLS_DIR at a dir that has it",
                "NatsServer::start");
  }
  std::unique_ptr<NatsServer> server(new NatsServer());
  FLOTILLA_TRY(server->makeDir("flotilla-nats"));
  server->options_ = std::move(options);
  if (!server->options_.config.empty()) {
    std::string config = server->options_.config;
    replaceAll(config, "$DIR", server->dir());
    server->config_file_ = server->dir() + "/nats.conf";
    FLOTILLA_TRY(writeFile(server->config_file_, config));
  }
  Error last_error = makeError(ErrorKind::kInternal, "not started");
  // Free ports can be taken by someone else between our probe and the server's bind: retry on that race only.
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    auto port = freeTcpPort();
    auto monitor = freeTcpPort();
    if (!port.ok() || !monitor.ok()) {
      return fail(port.ok() ? monitor.error() : port.error());
    }
    if (*port == *monitor) {
      continue;
    }
    server->port_ = *port;
    server->monitor_port_ = *monitor;
    Status launched = server->launch();
    if (launched.ok()) {
      return server;
    }
    last_error = launched.error();
    if (!addressInUse(server->logTail(10))) {
      break;
    }
    log::warn("nats-server port race, retrying on new ports", {{"port", *port}, {"attempt", attempt + 1}});
  }
  return fail(last_error);
}

NatsServer::~NatsServer() {
  if (process_.pid() > 0) {
    process_.stop(std::chrono::seconds(5));
  }
}

std::string NatsServer::url() const {
  return options_.scheme + "://127.0.0.1:" + std::to_string(port_);
}

bool NatsServer::running() {
  return process_.running();
}

bool NatsServer::jetStreamHealthy() const {
  return healthzOk(monitor_port_, /*js_enabled_only=*/false);
}

Status NatsServer::launch() {
  std::vector<std::string> argv = {options_.binary};
  if (!config_file_.empty()) {
    argv.insert(argv.end(), {"-c", config_file_});
  }
  if (options_.jetstream) {
    argv.push_back("-js");
  }
  argv.insert(argv.end(),
              {"-a", "127.0.0.1", "-p", std::to_string(port_), "-sd", storeDir(), "-m", std::to_string(monitor_port_)});
  argv.insert(argv.end(), options_.extra_args.begin(), options_.extra_args.end());
  // A crashed or killed test must not leave its server running.
  auto process = Process::start({.argv = argv, .output_file = logFile(), .kill_with_parent = true});
  if (!process.ok()) {
    return fail(process.error());
  }
  process_ = std::move(*process);
  Status ready = waitReady();
  if (!ready.ok()) {
    process_.stop(std::chrono::seconds(2));
    process_ = Process();
    return ready;
  }
  return {};
}

Status NatsServer::waitReady() {
  auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!process_.running()) {
      return fail(ErrorKind::kTransient, "nats-server exited during start; log tail:\n" + logTail(),
                  "NatsServer::start");
    }
    if (healthzOk(monitor_port_) && clientPortReady(port_)) {
      return {};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return fail(
      ErrorKind::kTransient,
      "nats-server not ready after " + std::to_string(options_.start_timeout.count()) + " ms; log tail:\n" + logTail(),
      "NatsServer::start");
}

Status NatsServer::stop() {
  if (process_.pid() <= 0) {
    return {};
  }
  int code = process_.stop(std::chrono::seconds(10));
  process_ = Process();
  // nats-server exits 1 after a SIGTERM shutdown; only a SIGKILL after the grace period means it hung.
  if (code == 128 + SIGKILL) {
    return fail(ErrorKind::kInternal, "nats-server did not stop on SIGTERM; log tail:\n" + logTail(),
                "NatsServer::stop");
  }
  return {};
}

Status NatsServer::restart() {
  FLOTILLA_TRY(stop());
  return launch();
}

void NatsServer::kill9() {
  if (process_.pid() <= 0) {
    return;
  }
  process_.signal(SIGKILL);
  process_.wait(std::chrono::seconds(10));
  process_ = Process();
}

std::string NatsServer::logText() const {
  return readFile(logFile()).valueOr("");
}

std::string NatsServer::logTail(size_t lines) const {
  std::string text = logText();
  size_t pos = text.size();
  for (size_t seen = 0; pos > 0 && seen <= lines;) {
    --pos;
    if (text[pos] == '\n') {
      ++seen;
    }
  }
  return text.substr(pos == 0 ? 0 : pos + 1);
}

Result<NatsServer*> sharedNatsServer() {
  static std::mutex mutex;
  static std::unique_ptr<NatsServer> server;
  std::lock_guard lock(mutex);
  if (!server) {
    auto started = NatsServer::start();
    if (!started.ok()) {
      return fail(started.error());
    }
    server = std::move(*started);
  }
  return server.get();
}

}  // namespace flotilla::harness

// The poller integration tests' fixture: a real nats-server -js (tests/harness/nats), a real git server
// (tests/harness/git, HTTP only unless a test starts its own), a provisioned hub, a data dir, and helpers to put
// GitRepos and read commit events, status records, archives and metrics.
#pragma once

#include <filesystem>
#include <functional>
#include <thread>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/payloads.h"
#include "flotilla/events/subjects.h"
#include "flotilla/harness/git_server.h"
#include "flotilla/harness/hub_test.h"
#include "flotilla/poller/gitrepo.h"
#include "flotilla/poller/poll_status.h"
#include "flotilla/poller/poller.h"
#include "flotilla/service/hub.h"
#include "flotilla/source/archive.h"

namespace flotilla::poller::poller_test {

using std::chrono::milliseconds;
using std::chrono::seconds;

inline constexpr const char* kWs = "fleet-default";

inline bool waitFor(const std::function<bool()>& check, milliseconds timeout = seconds(20)) {
  return harness::waitUntil(check, timeout);
}

//! A TCP listener that never accepts: connections complete in the kernel and then hear nothing, the case libgit2
//! 1.5 cannot time out by itself.
class SilentServer {
 public:
  SilentServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && ::listen(fd_, 16) == 0) {
      socklen_t len = sizeof(addr);
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
      port_ = ntohs(addr.sin_port);
    }
  }
  ~SilentServer() { close(); }
  void close() {
    if (fd_ >= 0) {
      ::close(fd_);  // pending connections get a reset, so the stuck git call finally returns
      fd_ = -1;
    }
  }
  [[nodiscard]] int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

class PollerIntegrationTest : public harness::HubTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(startHub("poller-test"));
    auto git = startGit({});
    ASSERT_TRUE(git.ok()) << git.error().describe();
    git_ = std::move(git).value();
    ASSERT_TRUE(git_->createRepo("app").ok());
    ASSERT_NO_FATAL_FAILURE(makeScratchDir("poller-data", data_dir_));
  }

  void TearDown() override {
    pollers_.clear();
    hub_ = {};
    git_.reset();
    nats_.reset();
    removeAll(data_dir_);
  }

  static Result<std::unique_ptr<harness::GitServer>> startGit(harness::GitServerOptions options) {
    options.https = false;
    options.git_daemon = false;
    options.ssh = false;
    return harness::GitServer::start(options);
  }

  //! Replaces the git server by one that asks for user alice, password correct-horse (repository "app" at one commit),
  //! and writes alice's credentials as secret `secret` of `workspace` into `creds`, a credentials dir.
  void startGitWithAliceAs(const std::string& workspace, const std::string& secret, std::string& creds) {
    auto git = startGit({.basic_user = "alice", .basic_password = "correct-horse"});
    ASSERT_TRUE(git.ok()) << git.error().describe();
    git_ = std::move(git).value();
    ASSERT_TRUE(git_->createRepo("app").ok());
    ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one").ok());
    creds = data_dir_ + "/creds";
    const std::string dir = creds + "/" + workspace + "/" + secret;
    std::filesystem::create_directories(dir);
    ASSERT_TRUE(writeFile(dir + "/username", "alice\n").ok());
    ASSERT_TRUE(writeFile(dir + "/password", "correct-horse\n").ok());
  }

  PollerOptions defaultOptions() const {
    return PollerOptions{.data_dir = data_dir_,
                         .workers = 2,
                         .git_timeout = seconds(10),
                         .watchdog_grace = milliseconds(500),
                         .max_backoff = seconds(2)};
  }

  Poller& startPoller(std::optional<PollerOptions> options = std::nullopt) {
    auto poller = Poller::create(options.value_or(defaultOptions()), hub_, metrics_);
    EXPECT_TRUE(poller.ok()) << poller.error().describe();
    EXPECT_TRUE((*poller)->start().ok());
    pollers_.push_back(std::move(poller).value());
    return *pollers_.back();
  }

  //! Starts a poller with the default options, puts GitRepo "app" on the "app" repository (`extra_spec` added to
  //! its spec) and waits for its first commit event.
  ::testing::AssertionResult startFollowingApp(const std::string& extra_spec = "") {
    startPoller();
    putGitRepo("app", gitRepoJson("app", git_->httpUrl("app"), extra_spec));
    if (!waitFor([&] { return commitCount() == 1; })) {
      return ::testing::AssertionFailure() << "no commit event for GitRepo app; git server log:\n" << git_->logTail();
    }
    return ::testing::AssertionSuccess();
  }

  static std::string gitRepoJson(const std::string& name, const std::string& url, const std::string& extra_spec = "",
                                 const std::string& paths = R"(["simple"])") {
    return R"({"apiVersion":"fleet.cattle.io/v1alpha1","kind":"GitRepo","metadata":{"name":")" + name +
           R"(","namespace":"fleet-default"},"spec":{"repo":")" + url + R"(","paths":)" + paths +
           R"(,"pollingInterval":"1s")" + extra_spec + "}}";
  }

  void putGitRepo(const std::string& name, const std::string& json) {
    ASSERT_TRUE(hub_.gitrepos->put(events::gitRepoKey(kWs, name), json).ok());
  }

  uint64_t commitCount() {
    auto info = hub_.js->streamInfo(service::kCommitsStream);
    return info.ok() ? info->messages : 0;
  }

  //! The commit event at stream sequence `sequence` (1-based), with its Nats-Msg-Id.
  std::pair<events::CommitEvent, std::string> commitEvent(uint64_t sequence) {
    auto message = hub_.js->getMessage(service::kCommitsStream, sequence);
    EXPECT_TRUE(message.ok()) << message.error().describe();
    if (!message.ok()) {
      return {};
    }
    auto event = events::parsePayload<events::CommitEvent>(message->data());
    EXPECT_TRUE(event.ok()) << event.error().describe();
    return {event.ok() ? *event : events::CommitEvent{}, message->header("Nats-Msg-Id").value_or("")};
  }

  std::optional<PollStatus> status(const std::string& name) {
    auto entry = hub_.status->get(pollStatusKey(kWs, name));
    if (!entry.ok()) {
      return std::nullopt;
    }
    auto decoded = decodePollStatus(entry->value);
    return decoded.ok() ? std::optional<PollStatus>(*decoded) : std::nullopt;
  }

  source::Archive archive(const std::string& object_name) {
    auto bytes = hub_.sources->get(object_name);
    EXPECT_TRUE(bytes.ok()) << (bytes.ok() ? "" : bytes.error().describe());
    auto decoded = source::decode(bytes.ok() ? *bytes : "");
    EXPECT_TRUE(decoded.ok()) << (decoded.ok() ? "" : decoded.error().describe());
    return decoded.ok() ? *decoded : source::Archive{};
  }

  double metric(const std::string& name, const prometheus::Labels& labels = {}) { return metrics_.value(name, labels); }

  size_t mirrorDirs() {
    size_t n = 0;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(data_dir_ + "/mirrors", ec), end; !ec && it != end; it.increment(ec)) {
      ++n;
    }
    return n;
  }

  std::unique_ptr<harness::GitServer> git_;
  Metrics metrics_{"poller"};
  std::string data_dir_;
  std::vector<std::unique_ptr<Poller>> pollers_;
};

}  // namespace flotilla::poller::poller_test

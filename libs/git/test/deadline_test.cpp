// Git network operations end at their deadline even when the server never answers: real TCP listeners that
// accept and stay silent, or answer one byte at a time, on every transport; a real git server keeps working
// in the same process (the deadline stream is process-wide).
#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "flotilla/git/mirror.h"
#include "flotilla/git/remote.h"
#include "flotilla/harness/git_server.h"

namespace flotilla::git {
namespace {

using std::chrono::milliseconds;

//! A TCP listener on 127.0.0.1 whose accepted connections get `behaviour` on a thread of their own: nothing at
//! all (silent), or a byte every 100 ms (trickle).
class MisbehavingServer {
 public:
  enum class Behaviour { kSilent, kTrickle };

  explicit MisbehavingServer(Behaviour behaviour) : behaviour_(behaviour) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && ::listen(listen_fd_, 16) == 0) {
      socklen_t len = sizeof(addr);
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
      port_ = ntohs(addr.sin_port);
    }
    thread_ = std::thread([this] { serve(); });
  }
  ~MisbehavingServer() {
    stop_ = true;
    thread_.join();
    for (int fd : connections_) {
      ::close(fd);
    }
    ::close(listen_fd_);
  }
  MisbehavingServer(const MisbehavingServer&) = delete;
  MisbehavingServer& operator=(const MisbehavingServer&) = delete;

  [[nodiscard]] std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  [[nodiscard]] int accepted() const { return accepted_.load(); }

 private:
  void serve() {
    const std::string trickle = "HTTP/1.1 200 OK\r\nX-Slow: " + std::string(100000, 'a');
    size_t sent = 0;
    while (!stop_) {
      pollfd waiting{.fd = listen_fd_, .events = POLLIN, .revents = 0};
      if (::poll(&waiting, 1, 100) > 0) {
        const int fd = ::accept(listen_fd_, nullptr, nullptr);
        if (fd >= 0) {
          connections_.push_back(fd);
          ++accepted_;
        }
      }
      if (behaviour_ == Behaviour::kTrickle && sent < trickle.size()) {
        for (int fd : connections_) {
          (void)::send(fd, trickle.data() + sent, 1, MSG_NOSIGNAL);
        }
        ++sent;
      }
    }
  }

  Behaviour behaviour_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::vector<int> connections_;
};

void expectTimedOut(const Result<RemoteHeads>& heads, const std::string& url) {
  ASSERT_FALSE(heads.ok()) << url;
  EXPECT_EQ(heads.error().kind, ErrorKind::kTransient) << heads.error().describe();
  EXPECT_NE(heads.error().message.find("timed out talking to"), std::string::npos) << heads.error().describe();
  EXPECT_NE(heads.error().message.find("no answer within 500 ms"), std::string::npos) << heads.error().describe();
}

const RemoteOptions kShort{.timeout = milliseconds(500)};

//! An ls-remote of <prefix><address>/x.git against a server behaving as `behaviour` times out; the number of
//! connections the server accepted.
int expectLsRemoteTimesOut(MisbehavingServer::Behaviour behaviour, const std::string& prefix,
                           const Credentials& credentials = {}) {
  MisbehavingServer server(behaviour);
  const std::string url = prefix + server.address() + "/x.git";
  expectTimedOut(lsRemote(url, credentials, kShort), url);
  return server.accepted();
}

TEST(GitDeadlineTest, SilentHttpServerTimesOut) {
  EXPECT_GE(expectLsRemoteTimesOut(MisbehavingServer::Behaviour::kSilent, "http://"), 1);
}

TEST(GitDeadlineTest, SilentGitDaemonTimesOut) {
  expectLsRemoteTimesOut(MisbehavingServer::Behaviour::kSilent, "git://");
}

TEST(GitDeadlineTest, SilentSshServerTimesOut) {
  // libssh2 reads the socket itself: only shutting the socket down at the deadline ends its handshake.
  expectLsRemoteTimesOut(MisbehavingServer::Behaviour::kSilent, "ssh://git@",
                         Credentials{.insecure_ignore_host_key = true});
}

TEST(GitDeadlineTest, SilentHttpsServerTimesOut) {
  expectLsRemoteTimesOut(MisbehavingServer::Behaviour::kSilent, "https://");
}

TEST(GitDeadlineTest, TricklingServerTimesOut) {
  // Answers, but one byte every 100 ms: progress never stops, the operation's deadline still ends it.
  expectLsRemoteTimesOut(MisbehavingServer::Behaviour::kTrickle, "http://");
}

TEST(GitDeadlineTest, MirrorFetchFromSilentServerTimesOut) {
  MisbehavingServer silent(MisbehavingServer::Behaviour::kSilent);
  char dir_template[] = "/tmp/flotilla-deadline-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string url = "http://" + silent.address() + "/x.git";
  auto mirror = Mirror::open(std::string(dir_template) + "/m.git", url);
  ASSERT_TRUE(mirror.ok()) << mirror.error().describe();
  auto fetched = mirror->fetch({}, FetchOptions{.timeout = milliseconds(500)});
  ASSERT_FALSE(fetched.ok());
  EXPECT_EQ(fetched.error().kind, ErrorKind::kTransient) << fetched.error().describe();
  EXPECT_NE(fetched.error().message.find("timed out talking to"), std::string::npos) << fetched.error().describe();
  std::filesystem::remove_all(dir_template);
}

TEST(GitDeadlineTest, OtherRemotesKeepWorkingBesideAStuckOne) {
  auto server = harness::GitServer::start();
  ASSERT_TRUE(server.ok()) << server.error().describe();
  ASSERT_TRUE((*server)->createRepo("app").ok());
  auto head = (*server)->commitFiles("app", "main", {{"a.txt", "a\n"}}, "one");
  ASSERT_TRUE(head.ok());
  MisbehavingServer silent(MisbehavingServer::Behaviour::kSilent);
  Result<RemoteHeads> stuck_result = RemoteHeads{};
  std::thread stuck([&] {
    stuck_result =
        lsRemote("http://" + silent.address() + "/x.git", {}, RemoteOptions{.timeout = std::chrono::seconds(5)});
  });
  // While one call waits for a silent server, calls to a healthy one on other threads complete (with deadlines
  // of their own) — over every transport the deadline stream carries.
  for (const std::string& url : {(*server)->httpUrl("app"), (*server)->gitUrl("app")}) {
    auto heads = lsRemote(url, {}, RemoteOptions{.timeout = std::chrono::seconds(30)});
    ASSERT_TRUE(heads.ok()) << url << ": " << heads.error().describe();
    EXPECT_EQ(heads->branch("main"), *head);
  }
  auto over_ssh = lsRemote(
      (*server)->sshUrl("app"),
      Credentials{.ssh_private_key = (*server)->sshPrivateKey(), .known_hosts = (*server)->knownHostsLine() + "\n"},
      RemoteOptions{.timeout = std::chrono::seconds(30)});
  ASSERT_TRUE(over_ssh.ok()) << over_ssh.error().describe();
  EXPECT_EQ(over_ssh->branch("main"), *head);
  stuck.join();  // ends at its own deadline
  ASSERT_FALSE(stuck_result.ok());
  EXPECT_NE(stuck_result.error().message.find("timed out talking to"), std::string::npos)
      << stuck_result.error().describe();
}

}  // namespace
}  // namespace flotilla::git

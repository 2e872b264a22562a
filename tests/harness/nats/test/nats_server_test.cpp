#include "flotilla/harness/nats_server.h"

#include <thread>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "flotilla/core/util.h"

namespace flotilla::harness {
namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

TEST(NatsServerHarnessTest, StartsOnFreePortsAndCleansUp) {
  std::string dir;
  {
    auto server = NatsServer::start();
    ASSERT_TRUE(server.ok()) << server.error().describe();
    NatsServer& s = **server;
    EXPECT_GT(s.port(), 0);
    EXPECT_GT(s.monitorPort(), 0);
    EXPECT_NE(s.port(), s.monitorPort());
    EXPECT_EQ(s.url(), "nats://127.0.0.1:" + std::to_string(s.port()));
    EXPECT_TRUE(s.running());
    EXPECT_NE(s.logText().find("Server is ready"), std::string::npos);
    EXPECT_NE(s.logText().find("Starting JetStream"), std::string::npos);
    dir = s.dir();
    EXPECT_TRUE(exists(s.storeDir()));
  }
  EXPECT_FALSE(exists(dir)) << "temp dir left behind";
}

TEST(NatsServerHarnessTest, RestartKeepsPortAndStoreAndSurvivesKill9) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server.ok()) << server.error().describe();
  NatsServer& s = **server;
  int port = s.port();
  ASSERT_TRUE(s.restart().ok());
  EXPECT_EQ(s.port(), port);
  EXPECT_TRUE(s.running());
  s.kill9();
  EXPECT_FALSE(s.running());
  ASSERT_TRUE(s.restart().ok()) << s.logTail();
  EXPECT_TRUE(s.running());
  ASSERT_TRUE(s.stop().ok());
  EXPECT_FALSE(s.running());
}

// The pinned server (tools/versions.env), not whatever nats-server happens to be on the machine.
TEST(NatsServerHarnessTest, RunsThePinnedServer) {
  auto server = NatsServer::start();
  ASSERT_TRUE(server.ok()) << server.error().describe();
  auto pinned = readFile(std::string(FLOTILLA_SOURCE_DIR) + "/tools/versions.env");
  ASSERT_TRUE(pinned.ok()) << pinned.error().describe();
  size_t at = pinned->find("NATS_SERVER_VERSION=");
  ASSERT_NE(at, std::string::npos);
  std::string version = pinned->substr(at + 20, pinned->find_first_of(" \t\n", at) - at - 20);
  EXPECT_NE((*server)->logText().find("Version:  " + version.substr(1)), std::string::npos)
      << "expected nats-server " << version << ", log:\n"
      << (*server)->logTail(40);
}

TEST(NatsServerHarnessTest, MissingBinaryIsNotFoundAndSaysHowToGetIt) {
  auto server = NatsServer::start({.binary = "/nonexistent/nats-server"});
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.error().kind, ErrorKind::kNotFound);
  EXPECT_NE(server.error().message.find("scripts/setup"), std::string::npos) << server.error().describe();
}

TEST(NatsServerHarnessTest, FailedStartReportsTheLogTail) {
  auto server = NatsServer::start({.config = "jetstream {{{ broken", .start_timeout = std::chrono::seconds(5)});
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.error().message.find("exited during start"), std::string::npos) << server.error().message;
  EXPECT_NE(server.error().message.find("Parse error"), std::string::npos) << server.error().message;
}

// A test process that dies without cleaning up (crash, SIGKILL, ctest timeout) takes its server with it.
TEST(NatsServerHarnessTest, ServerDiesWithACrashedTestProcess) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    auto server = NatsServer::start();
    std::string report = server.ok() ? std::to_string((*server)->port()) + " " + (*server)->dir() : "0 -";
    (void)!::write(fds[1], report.data(), report.size());
    ::_exit(0);  // no destructors: as if the test process crashed
  }
  ::close(fds[1]);
  char buffer[512] = {0};
  ssize_t n = ::read(fds[0], buffer, sizeof(buffer) - 1);
  ::close(fds[0]);
  ::waitpid(child, nullptr, 0);
  ASSERT_GT(n, 0);
  int port = std::atoi(buffer);
  std::string dir = std::string(buffer).substr(std::string(buffer).find(' ') + 1);
  ASSERT_GT(port, 0) << buffer;
  bool gone = false;
  for (int i = 0; i < 250 && !gone; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    gone = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0;
    ::close(fd);
    if (!gone) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  EXPECT_TRUE(gone) << "nats-server outlived its test process";
  removeAll(dir);
}

TEST(NatsServerHarnessTest, SharedServerIsOneInstance) {
  auto a = sharedNatsServer();
  auto b = sharedNatsServer();
  ASSERT_TRUE(a.ok()) << a.error().describe();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(uniqueName("x"), uniqueName("x"));
}

}  // namespace
}  // namespace flotilla::harness

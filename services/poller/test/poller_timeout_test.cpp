// Silent git servers cannot stall polling: each call to one ends at git_timeout at the socket, so more silent
// servers than workers and than the watchdog's stuck slots still leave room for every healthy GitRepo. Before
// socket deadlines every such call stayed stuck until the watchdog abandoned it, and after max_stuck abandoned
// calls nothing new was dispatched at all ("16 stuck calls block polling for everyone").
#include <memory>
#include <string>
#include <vector>

#include "poller_fixture.h"

namespace flotilla::poller::poller_test {
namespace {

class PollerTimeoutTest : public PollerIntegrationTest {};

TEST_F(PollerTimeoutTest, SilentServersDoNotExhaustWorkers) {
  ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one").ok());
  PollerOptions options = defaultOptions();
  options.workers = 1;
  options.max_stuck = 1;
  options.git_timeout = seconds(1);
  options.watchdog_grace = seconds(60);  // only the socket deadline can end the calls within this test
  startPoller(options);
  std::vector<std::unique_ptr<SilentServer>> silent;
  for (int i = 0; i < 3; ++i) {
    silent.push_back(std::make_unique<SilentServer>());
    ASSERT_GT(silent.back()->port(), 0);
    const std::string name = "silent-" + std::to_string(i);
    putGitRepo(name, gitRepoJson(name, "http://127.0.0.1:" + std::to_string(silent.back()->port()) + "/x.git"));
  }
  ASSERT_TRUE(waitFor([&] { return metric("git_operations_in_flight") == 1; }));
  putGitRepo("app", gitRepoJson("app", git_->httpUrl("app")));

  ASSERT_TRUE(waitFor([&] { return commitCount() == 1; }));
  EXPECT_EQ(commitEvent(1).first.gitrepo, "app");
  for (int i = 0; i < 3; ++i) {
    const std::string name = "silent-" + std::to_string(i);
    ASSERT_TRUE(waitFor([&] { return status(name) && status(name)->failures >= 1; })) << name;
    EXPECT_NE(status(name)->last_error.find("timed out talking to"), std::string::npos) << status(name)->last_error;
    EXPECT_NE(status(name)->last_error.find("no answer within 1000 ms"), std::string::npos) << status(name)->last_error;
  }
  EXPECT_GE(metric("errors_total", {{"stage", "ls_remote"}, {"kind", "Transient"}}), 3);
  EXPECT_EQ(metric("git_operations_abandoned_total"), 0);
  EXPECT_EQ(metric("git_operations_stuck"), 0);
}

}  // namespace
}  // namespace flotilla::poller::poller_test

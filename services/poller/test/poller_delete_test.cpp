// A deleted GitRepo against a real nats-server and git server: the poller publishes CommitEvent{deleted} (retried
// until JetStream acks it), and only then removes the GitRepo's status, so a deletion the poller missed or did not
// finish is done at the next start (docs/pipeline.md "Deletes that cascade").
#include "poller_fixture.h"

namespace flotilla::poller {
namespace {

using namespace flotilla::poller::poller_test;

class PollerDeleteTest : public PollerIntegrationTest {
 protected:
  //! The revision of the delete marker of GitRepo `name` in `gitrepos`.
  uint64_t deleteRevision(const std::string& name) {
    auto history = hub_.gitrepos->history(events::gitRepoKey(kWs, name));
    EXPECT_TRUE(history.ok() && !history->empty());
    if (!history.ok() || history->empty()) {
      return 0;
    }
    EXPECT_NE(history->back().operation, bus::KvOperation::kPut);
    return history->back().revision;
  }

  //! errors_total{stage="delete"} over every kind.
  double deleteErrors() {
    double sum = 0;
    for (ErrorKind kind : {ErrorKind::kTransient, ErrorKind::kInvalid, ErrorKind::kNotFound, ErrorKind::kConflict,
                           ErrorKind::kWait, ErrorKind::kPermanent, ErrorKind::kInternal}) {
      sum += metric("errors_total", {{"stage", "delete"}, {"kind", std::string(errorKindName(kind))}});
    }
    return sum;
  }

  //! The GitRepo document with a uid, as `flotilla apply` writes it.
  std::string gitRepoWithUid(const std::string& name, const std::string& uid) {
    return R"({"apiVersion":"fleet.cattle.io/v1alpha1","kind":"GitRepo","metadata":{"name":")" + name +
           R"(","namespace":"fleet-default","uid":")" + uid + R"("},"spec":{"repo":")" + git_->httpUrl("app") +
           R"(","paths":["simple"],"pollingInterval":"1s"}})";
  }
};

// Deleted while the poller runs: a CommitEvent{deleted} with the documented Msg-Id, naming the repository and the
// last commit, and then the status record goes.
TEST_F(PollerDeleteTest, DeletedGitRepoPublishesItsDeletionThenDropsItsStatus) {
  auto head = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one");
  ASSERT_TRUE(head.ok());
  ASSERT_TRUE(startFollowingApp());
  ASSERT_TRUE(waitFor([&] { return status("app") && status("app")->commit == *head; }));

  ASSERT_TRUE(hub_.gitrepos->remove(events::gitRepoKey(kWs, "app")).ok());
  const uint64_t revision = deleteRevision("app");
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2; }));
  auto [event, msg_id] = commitEvent(2);
  EXPECT_TRUE(event.deleted);
  EXPECT_EQ(event.gitrepo, "app");
  EXPECT_EQ(event.repo, git_->httpUrl("app"));
  EXPECT_EQ(event.previous_commit, *head);
  EXPECT_EQ(msg_id, events::commitDeletedMsgId(kWs, "app", revision));
  EXPECT_EQ(event.id, msg_id);
  ASSERT_TRUE(waitFor([&] { return !status("app").has_value(); }));
  EXPECT_EQ(metric("gitrepo_deletions_total", {{"result", "published"}}), 1);
}

// Deleted while no poller ran: the next poller finds the status without a spec, publishes the deletion (with the
// delete marker's revision) and removes the status. A third start publishes nothing more.
TEST_F(PollerDeleteTest, GitRepoDeletedWhileThePollerWasDownIsDeletedAtStart) {
  auto head = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one");
  ASSERT_TRUE(head.ok());
  ASSERT_TRUE(startFollowingApp());
  ASSERT_TRUE(waitFor([&] { return status("app") && status("app")->commit == *head; }));
  pollers_.clear();

  ASSERT_TRUE(hub_.gitrepos->remove(events::gitRepoKey(kWs, "app")).ok());
  const uint64_t revision = deleteRevision("app");
  startPoller();
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2; }));
  auto [event, msg_id] = commitEvent(2);
  EXPECT_TRUE(event.deleted);
  EXPECT_EQ(event.previous_commit, *head);
  EXPECT_EQ(msg_id, events::commitDeletedMsgId(kWs, "app", revision));
  ASSERT_TRUE(waitFor([&] { return !status("app").has_value(); }));
  pollers_.clear();

  Poller& again = startPoller();
  ASSERT_TRUE(waitFor([&] {
    std::string why;
    return again.ready(why);
  }));
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_EQ(commitCount(), 2u);
}

// JetStream cannot take the deletion (the commits stream is gone): the poller logs, counts and retries, and keeps
// the status meanwhile; a GitRepo re-created under the same name (new uid) is not polled before the deletion is
// published. Once the stream is back: the deletion first, then the new GitRepo's commit (a new Msg-Id, not a
// duplicate of the deleted one's), and the status is the new GitRepo's.
TEST_F(PollerDeleteTest, DeletionIsRetriedUntilAckedAndARecreatedGitRepoWaitsForIt) {
  auto head = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one");
  ASSERT_TRUE(head.ok());
  startPoller();
  putGitRepo("app", gitRepoWithUid("app", "uid-one"));
  ASSERT_TRUE(waitFor([&] { return commitCount() == 1 && status("app") && status("app")->commit == *head; }));
  const std::string first_id = commitEvent(1).second;

  ASSERT_TRUE(hub_.js->deleteStream(service::kCommitsStream).ok());
  ASSERT_TRUE(hub_.gitrepos->remove(events::gitRepoKey(kWs, "app")).ok());
  ASSERT_TRUE(waitFor([&] { return deleteErrors() >= 2; })) << "the failed publishes are counted";
  EXPECT_TRUE(status("app").has_value()) << "the status stays until the deletion is published";
  putGitRepo("app", gitRepoWithUid("app", "uid-two"));
  std::this_thread::sleep_for(milliseconds(1500));  // a few polling intervals: the re-created GitRepo waits
  EXPECT_EQ(metric("polls_total", {{"outcome", "published"}}) + metric("polls_total", {{"outcome", "failed"}}), 1);

  ASSERT_TRUE(service::ensureTopology(*hub_.js).ok());
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2; }));
  auto [deleted, deleted_id] = commitEvent(1);
  EXPECT_TRUE(deleted.deleted);
  EXPECT_EQ(deleted.previous_commit, *head);
  auto [recreated, recreated_id] = commitEvent(2);
  EXPECT_FALSE(recreated.deleted);
  EXPECT_EQ(recreated.commit, *head);
  EXPECT_EQ(recreated.previous_commit, "") << "the re-created GitRepo starts afresh";
  EXPECT_NE(recreated_id, first_id);
  ASSERT_TRUE(waitFor([&] { return status("app") && status("app")->commit == *head; }));
}

}  // namespace
}  // namespace flotilla::poller

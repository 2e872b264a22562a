// Integration tests of the poller against a real nats-server -js (tests/harness/nats) and a real git server
// (git http-backend, tests/harness/git): GitRepo specs in KV in, commit events, source archives and poll status
// out. Polling intervals are 1s so each test takes a few seconds.
#include "poller_fixture.h"

namespace flotilla::poller {
namespace {

using namespace flotilla::poller::poller_test;

// A GitRepo put in KV -> a commit event with the right commit, Msg-Id and a source archive holding the files
// under its paths; status records it.
TEST_F(PollerIntegrationTest, PublishesCommitEventWithSourceArchive) {
  auto head = git_->commitFiles(
      "app", "main",
      {{"simple/deploy.yaml", "kind: ConfigMap\n"}, {"simple/sub/more.yaml", "a: 1\n"}, {"other/x.yaml", "b: 2\n"}},
      "first");
  ASSERT_TRUE(head.ok());
  Poller& poller = startPoller();
  putGitRepo("app", gitRepoJson("app", git_->httpUrl("app")));

  ASSERT_TRUE(waitFor([&] { return commitCount() == 1; })) << git_->logTail();
  auto [event, msg_id] = commitEvent(1);
  EXPECT_EQ(event.workspace, kWs);
  EXPECT_EQ(event.gitrepo, "app");
  EXPECT_EQ(event.commit, *head);
  EXPECT_EQ(event.previous_commit, "");
  EXPECT_EQ(event.branch, "main");  // the remote's default branch
  EXPECT_EQ(event.repo, git_->httpUrl("app"));
  EXPECT_EQ(event.paths, std::vector<std::string>{"simple"});
  EXPECT_TRUE(event.changed);
  EXPECT_EQ(event.id, msg_id);
  EXPECT_EQ(msg_id.rfind(events::commitMsgId(kWs, "app", *head, 0) + "/", 0), 0u) << msg_id;

  source::Archive files = archive(event.source_object);
  EXPECT_EQ(files.commit, *head);
  ASSERT_EQ(files.files.size(), 2u);
  EXPECT_EQ(files.files[0].path, "simple/deploy.yaml");
  EXPECT_EQ(files.files[0].content, "kind: ConfigMap\n");
  EXPECT_EQ(files.files[1].path, "simple/sub/more.yaml");

  ASSERT_TRUE(waitFor([&] {
    auto s = status("app");
    return s && s->commit == *head;
  }));
  auto s = status("app");
  EXPECT_EQ(s->polling_commit, *head);
  EXPECT_EQ(s->source_object, event.source_object);
  EXPECT_EQ(s->last_error, "");
  EXPECT_FALSE(s->last_poll_time.empty());
  EXPECT_FALSE(s->next_poll_time.empty());
  EXPECT_EQ(s->failures, 0);
  std::string why;
  EXPECT_TRUE(poller.ready(why)) << why;
  EXPECT_EQ(metric("commits_published_total"), 1);
  EXPECT_EQ(metric("stage_latency_seconds", {{"stage", "poll_to_commit"}}), 1);
  EXPECT_EQ(metric("stage_latency_seconds", {{"stage", "webhook_to_commit"}}), 0);

  // The public CloudEvent of the commit (docs/events/cloudevents.md), with the CommitEvent as its data.
  const std::string subject = events::eventsSubject("gitrepo", {kWs, "app"});
  ASSERT_TRUE(waitFor([&] { return hub_.js->getLastMessage(service::kEventsStream, subject).ok(); }));
  auto announced =
      events::decodeCloudEvent(Json::parse(hub_.js->getLastMessage(service::kEventsStream, subject)->data()).value());
  ASSERT_TRUE(announced.ok()) << announced.error().describe();
  EXPECT_EQ(announced->type, "io.flotilla.gitrepo.commit");
  EXPECT_EQ(announced->source, "/flotilla/poller");
  EXPECT_EQ(announced->subject, std::string(kWs) + "/app");
  EXPECT_EQ(announced->id, event.id);
  EXPECT_EQ(announced->data.getString("commit"), *head);
  EXPECT_EQ(metric("public_events_total", {{"type", "io.flotilla.gitrepo.commit"}}), 1);
}

// No new commit -> no event however often it polls; a new commit -> a new event that names the previous one.
TEST_F(PollerIntegrationTest, NewCommitPublishesAgainAndUnchangedPublishesNothing) {
  auto first = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "first");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(startFollowingApp());

  ASSERT_TRUE(waitFor([&] { return metric("polls_total", {{"outcome", "unchanged"}}) >= 3; }));
  EXPECT_EQ(commitCount(), 1u);
  EXPECT_EQ(metric("fetches_total", {{"result", "ok"}}), 1);  // ls-remote only while nothing moves

  auto second = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 2\n"}}, "second");
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2; }));
  auto [event, msg_id] = commitEvent(2);
  EXPECT_EQ(event.commit, *second);
  EXPECT_EQ(event.previous_commit, *first);
  EXPECT_TRUE(event.changed);
  EXPECT_EQ(archive(event.source_object).files.at(0).content, "v: 2\n");
}

// Documented behaviour: a commit that touches only files outside `paths` is still published, with
// changed=false, so the bundler can skip rendering; status records the commit.
TEST_F(PollerIntegrationTest, CommitOutsidePathsIsPublishedAsUnchanged) {
  ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}, {"docs/README.md", "x\n"}}, "one").ok());
  ASSERT_TRUE(startFollowingApp());

  auto docs = git_->commitFiles("app", "main", {{"docs/README.md", "y\n"}}, "docs only");
  ASSERT_TRUE(docs.ok());
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2; }));
  auto [event, msg_id] = commitEvent(2);
  EXPECT_EQ(event.commit, *docs);
  EXPECT_FALSE(event.changed);
  ASSERT_TRUE(waitFor([&] { return status("app") && status("app")->commit == *docs; }));
  EXPECT_FALSE(status("app")->changed);
}

// Two GitRepos on one URL share one mirror, and each new commit is fetched once for both.
TEST_F(PollerIntegrationTest, GitReposOnOneUrlShareOneMirrorAndOneFetch) {
  ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}, {"web/b.yaml", "w: 1\n"}}, "one").ok());
  startPoller();
  putGitRepo("one", gitRepoJson("one", git_->httpUrl("app")));
  putGitRepo("two", gitRepoJson("two", git_->httpUrl("app"), "", R"(["web"])"));
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2; }));
  EXPECT_EQ(metric("fetches_total", {{"result", "ok"}}), 1);
  EXPECT_EQ(mirrorDirs(), 1u);

  auto second = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 2\n"}, {"web/b.yaml", "w: 2\n"}}, "two");
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(waitFor([&] { return commitCount() == 4; }));
  EXPECT_EQ(metric("fetches_total", {{"result", "ok"}}), 2);
  EXPECT_EQ(mirrorDirs(), 1u);
  EXPECT_EQ(commitEvent(3).first.commit, *second);
  EXPECT_EQ(commitEvent(4).first.commit, *second);
}

// The git server goes away: status shows the error, the failure count and the next try (backing off); it comes
// back: the next commit is published and the error clears.
TEST_F(PollerIntegrationTest, GitServerOutageBacksOffAndRecovers) {
  ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one").ok());
  ASSERT_TRUE(startFollowingApp());

  git_->stopHttp();
  ASSERT_TRUE(waitFor([&] {
    auto s = status("app");
    return s && s->failures >= 2;
  }));
  auto down = *status("app");
  EXPECT_NE(down.last_error.find(git_->httpUrl("app")), std::string::npos) << down.last_error;
  EXPECT_EQ(down.last_error_kind, "Transient");
  EXPECT_FALSE(down.last_error_time.empty());
  EXPECT_FALSE(down.next_poll_time.empty());
  EXPECT_GT(down.next_poll_time, down.last_error_time);
  EXPECT_GE(metric("errors_total", {{"stage", "ls_remote"}, {"kind", "Transient"}}), 2);
  EXPECT_GE(metric("polls_total", {{"outcome", "failed"}}), 2);

  ASSERT_TRUE(git_->startHttp().ok());
  auto second = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 2\n"}}, "two");
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2; }));
  EXPECT_EQ(commitEvent(2).first.commit, *second);
  ASSERT_TRUE(waitFor([&] {
    auto s = status("app");
    return s && s->failures == 0 && s->last_error.empty() && s->commit == *second;
  }));
}

// A GitRepo document with a typo gets a status error naming the field; other GitRepos are not affected.
TEST_F(PollerIntegrationTest, InvalidDocumentReportsTheFieldInStatus) {
  ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one").ok());
  startPoller();
  putGitRepo("bad", gitRepoJson("bad", git_->httpUrl("app"), R"(,"pollingIntervall":"1s")"));
  putGitRepo("garbage", "{not json");
  putGitRepo("good", gitRepoJson("good", git_->httpUrl("app")));
  ASSERT_TRUE(waitFor([&] { return commitCount() == 1; }));
  EXPECT_EQ(commitEvent(1).first.gitrepo, "good");

  ASSERT_TRUE(waitFor([&] { return status("bad").has_value() && status("garbage").has_value(); }));
  auto bad = *status("bad");
  EXPECT_NE(bad.last_error.find("spec.pollingIntervall"), std::string::npos) << bad.last_error;
  EXPECT_EQ(bad.last_error_kind, "Invalid");
  EXPECT_EQ(bad.next_poll_time, "");
  EXPECT_NE(status("garbage")->last_error.find("not a JSON document"), std::string::npos);
  EXPECT_EQ(metric("errors_total", {{"stage", "spec"}, {"kind", "Invalid"}}), 2);

  // Fixing the document clears the error and the GitRepo publishes.
  putGitRepo("bad", gitRepoJson("bad", git_->httpUrl("app")));
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2; }));
  ASSERT_TRUE(waitFor([&] { return status("bad")->last_error.empty() && !status("bad")->commit.empty(); }));
}

// forceSyncGeneration -> the same commit is published again under a new Msg-Id.
TEST_F(PollerIntegrationTest, ForceSyncGenerationRepublishes) {
  auto head = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one");
  ASSERT_TRUE(head.ok());
  ASSERT_TRUE(startFollowingApp());
  putGitRepo("app", gitRepoJson("app", git_->httpUrl("app"), R"(,"forceSyncGeneration":1)"));
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2; }));
  auto [first, first_id] = commitEvent(1);
  auto [second, second_id] = commitEvent(2);
  EXPECT_EQ(second.commit, *head);
  EXPECT_EQ(second.force_sync_generation, 1);
  EXPECT_EQ(second.previous_commit, *head);
  EXPECT_NE(first_id, second_id);
  ASSERT_TRUE(waitFor([&] { return status("app")->force_sync_generation == 1; }));
}

// A spec change that shapes the sources (paths) republishes the same commit with the new selection.
TEST_F(PollerIntegrationTest, PathsChangeRepublishesTheCommit) {
  ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}, {"web/b.yaml", "w\n"}}, "one").ok());
  ASSERT_TRUE(startFollowingApp());
  putGitRepo("app", gitRepoJson("app", git_->httpUrl("app"), "", R"(["web"])"));
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2; }));
  auto [event, msg_id] = commitEvent(2);
  EXPECT_TRUE(event.changed);
  EXPECT_EQ(archive(event.source_object).files.at(0).path, "web/b.yaml");
  // A polling-only change (the interval) does not.
  putGitRepo("app", R"({"apiVersion":"fleet.cattle.io/v1alpha1","kind":"GitRepo","metadata":{"name":"app",)"
                    R"("namespace":"fleet-default"},"spec":{"repo":")" +
                        git_->httpUrl("app") + R"(","paths":["web"],"pollingInterval":"2s"}})");
  ASSERT_TRUE(waitFor([&] { return metric("polls_total", {{"outcome", "unchanged"}}) >= 2; }));
  EXPECT_EQ(commitCount(), 2u);
}

// A new poller instance with the same data dir and KV does not publish the commit again; and if its status
// record were lost, JetStream drops the republish as a duplicate (same Msg-Id).
TEST_F(PollerIntegrationTest, RestartDoesNotPublishADuplicate) {
  auto head = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one");
  ASSERT_TRUE(head.ok());
  startPoller();
  putGitRepo("app", gitRepoJson("app", git_->httpUrl("app")));
  ASSERT_TRUE(waitFor([&] { return commitCount() == 1 && status("app") && status("app")->commit == *head; }));
  pollers_.clear();

  const double polls_before = metric("polls_total", {{"outcome", "unchanged"}});
  startPoller();
  ASSERT_TRUE(waitFor([&] { return metric("polls_total", {{"outcome", "unchanged"}}) >= polls_before + 2; }));
  EXPECT_EQ(commitCount(), 1u);
  EXPECT_EQ(metric("commits_published_total"), 1);
  pollers_.clear();

  // Lose the status record: the next instance publishes again, and JetStream drops it.
  ASSERT_TRUE(hub_.status->remove(pollStatusKey(kWs, "app")).ok());
  startPoller();
  ASSERT_TRUE(waitFor([&] { return metric("publish_duplicates_total") == 1; }));
  EXPECT_EQ(commitCount(), 1u);
  ASSERT_TRUE(waitFor([&] { return status("app") && status("app")->commit == *head; }));
}

// A server that accepts and then never answers blocks only its own mirror, and not even that for long: with a
// single worker the call ends at git_timeout at the socket (libs/git), the GitRepo reports the timeout, and the
// other GitRepo still publishes. The watchdog (grace 500 ms after the timeout) stays a backstop.
TEST_F(PollerIntegrationTest, StuckServerDoesNotBlockOtherMirrors) {
  SilentServer silent;
  ASSERT_GT(silent.port(), 0);
  ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one").ok());
  PollerOptions options = defaultOptions();
  options.workers = 1;
  options.git_timeout = seconds(1);
  startPoller(options);
  putGitRepo("stuck", gitRepoJson("stuck", "http://127.0.0.1:" + std::to_string(silent.port()) + "/x.git"));
  ASSERT_TRUE(waitFor([&] { return metric("git_operations_in_flight") == 1; }));
  putGitRepo("app", gitRepoJson("app", git_->httpUrl("app")));

  ASSERT_TRUE(waitFor([&] { return commitCount() == 1; }));
  EXPECT_EQ(commitEvent(1).first.gitrepo, "app");
  ASSERT_TRUE(waitFor([&] { return status("stuck") && status("stuck")->failures >= 1; }));
  // Timed out at the socket, or (on a machine too loaded to run the call's last steps within the grace) by the
  // watchdog: either way a Transient timeout with backoff.
  const std::string error = status("stuck")->last_error;
  EXPECT_TRUE(error.find("timed out talking to") != std::string::npos ||
              error.find("did not finish within") != std::string::npos)
      << error;

  silent.close();
  ASSERT_TRUE(waitFor([&] { return metric("git_operations_stuck") == 0; }));
}

// Deleting a GitRepo removes its status record and, once no GitRepo uses the URL, its mirror.
TEST_F(PollerIntegrationTest, DeletedGitRepoLosesStatusAndMirror) {
  ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one").ok());
  startPoller();
  putGitRepo("app", gitRepoJson("app", git_->httpUrl("app")));
  ASSERT_TRUE(waitFor([&] { return commitCount() == 1 && status("app").has_value(); }));
  EXPECT_EQ(mirrorDirs(), 1u);
  ASSERT_TRUE(hub_.gitrepos->remove(events::gitRepoKey(kWs, "app")).ok());
  ASSERT_TRUE(waitFor([&] { return !status("app").has_value(); }));
  ASSERT_TRUE(waitFor([&] { return mirrorDirs() == 0; }));
  EXPECT_EQ(metric("mirrors_removed_total"), 1);
}

// revision: a tag follows the tag; a commit sha (not advertised by ls-remote) is fetched and resolved.
TEST_F(PollerIntegrationTest, RevisionTagAndCommitSha) {
  auto first = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(git_->createTag("app", "v1", *first, "release 1").ok());
  auto second = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 2\n"}}, "two");
  ASSERT_TRUE(second.ok());
  auto third = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 3\n"}}, "three");
  ASSERT_TRUE(third.ok());
  startPoller();
  putGitRepo("tag", gitRepoJson("tag", git_->httpUrl("app"), R"(,"revision":"v1")"));
  putGitRepo("sha", gitRepoJson("sha", git_->httpUrl("app"), R"(,"revision":")" + second->substr(0, 10) + "\""));
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2; }));
  std::map<std::string, std::string> commits;
  for (uint64_t i = 1; i <= 2; ++i) {
    auto [event, id] = commitEvent(i);
    commits[event.gitrepo] = event.commit;
  }
  EXPECT_EQ(commits["tag"], *first);
  EXPECT_EQ(commits["sha"], *second);
  ASSERT_TRUE(waitFor([&] { return status("sha") && status("sha")->polling_commit == *second; }));
}

// Credentials from --credentials-dir; a wrong secret gives a status error naming the GitRepo and the secret,
// never the password.
TEST_F(PollerIntegrationTest, CredentialsFromTheCredentialsDir) {
  std::string creds;
  ASSERT_NO_FATAL_FAILURE(startGitWithAliceAs("fleet-default", "good", creds));
  ASSERT_TRUE(writeFile(creds + "/fleet-default/wrong.yaml", "username: alice\npassword: battery-staple\n").ok());
  PollerOptions options = defaultOptions();
  options.credentials_dir = creds;
  startPoller(options);
  // The test git server speaks plain http: the GitRepos opt in to sending credentials over it.
  const std::string allow_http = R"(,"insecureAllowHTTP":true)";
  putGitRepo("good", gitRepoJson("good", git_->httpUrl("app"), R"(,"clientSecretName":"good")" + allow_http));
  putGitRepo("wrong", gitRepoJson("wrong", git_->httpUrl("app"), R"(,"clientSecretName":"wrong")" + allow_http));
  putGitRepo("none", gitRepoJson("none", git_->httpUrl("app"), R"(,"clientSecretName":"missing")" + allow_http));
  ASSERT_TRUE(waitFor([&] { return commitCount() == 1; }));
  EXPECT_EQ(commitEvent(1).first.gitrepo, "good");
  ASSERT_TRUE(waitFor([&] { return status("wrong") && !status("wrong")->last_error.empty(); }));
  const std::string wrong = status("wrong")->last_error;
  EXPECT_NE(wrong.find("authentication failed"), std::string::npos) << wrong;
  EXPECT_NE(wrong.find("GitRepo fleet-default/wrong (clientSecretName \"wrong\")"), std::string::npos) << wrong;
  EXPECT_EQ(wrong.find("battery-staple"), std::string::npos);
  EXPECT_EQ(status("wrong")->last_error_kind, "Permanent");
  ASSERT_TRUE(waitFor([&] { return status("none") && !status("none")->last_error.empty(); }));
  const std::string none = status("none")->last_error;
  EXPECT_NE(none.find("GitRepo fleet-default/none"), std::string::npos) << none;
  EXPECT_NE(none.find("\"missing\""), std::string::npos) << none;
  EXPECT_EQ(commitCount(), 1u);
}

// Credentials are per workspace: a GitRepo in team-b naming team-a's secret gets the status error a missing secret
// gets (naming the GitRepo, the field and the secret), nothing reaches the git server; and credentials over plain
// http:// are refused without spec.insecureAllowHTTP, naming the field.
TEST_F(PollerIntegrationTest, AnotherWorkspacesSecretAndCredentialsOverHttpAreRefused) {
  std::string creds;
  ASSERT_NO_FATAL_FAILURE(startGitWithAliceAs("team-a", "alice", creds));
  PollerOptions options = defaultOptions();
  options.credentials_dir = creds;
  startPoller(options);
  const std::string url = git_->httpUrl("app");
  auto gitRepoIn = [&](const std::string& ws, const std::string& name, const std::string& extra) {
    std::string json = gitRepoJson(name, url, extra);
    json.replace(json.find("fleet-default"), 13, ws);
    ASSERT_TRUE(hub_.gitrepos->put(events::gitRepoKey(ws, name), json).ok());
  };
  gitRepoIn("team-a", "owner", R"(,"clientSecretName":"alice","insecureAllowHTTP":true)");
  gitRepoIn("team-b", "thief", R"(,"clientSecretName":"alice","insecureAllowHTTP":true)");
  gitRepoIn("team-b", "typo", R"(,"clientSecretName":"alicee","insecureAllowHTTP":true)");
  gitRepoIn("team-a", "cleartext", R"(,"clientSecretName":"alice")");
  ASSERT_TRUE(waitFor([&] { return commitCount() == 1; }));
  EXPECT_EQ(commitEvent(1).first.gitrepo, "owner");
  auto errorOf = [&](const std::string& ws, const std::string& name) {
    std::string error;
    waitFor([&] {
      auto record = hub_.status->get(pollStatusKey(ws, name));
      if (!record.ok()) {
        return false;
      }
      auto parsed = decodePollStatus(record->value);
      error = parsed.ok() ? parsed->last_error : "";
      return !error.empty();
    });
    return error;
  };
  const std::string thief = errorOf("team-b", "thief");
  EXPECT_EQ(thief,
            "GitRepo team-b/thief: clientSecretName: secret \"alice\" not found in workspace \"team-b\" (credentials)");
  EXPECT_EQ(errorOf("team-b", "typo"),
            "GitRepo team-b/typo: clientSecretName: secret \"alicee\" not found in workspace \"team-b\" (credentials)");
  const std::string cleartext = errorOf("team-a", "cleartext");
  EXPECT_NE(cleartext.find("GitRepo team-a/cleartext: spec.repo is a plain http:// URL"), std::string::npos)
      << cleartext;
  EXPECT_NE(cleartext.find("spec.insecureAllowHTTP"), std::string::npos) << cleartext;
  EXPECT_EQ(commitCount(), 1u);
  EXPECT_GE(metric("errors_total", {{"stage", "credentials"}, {"kind", "NotFound"}}), 1);
}

// disablePolling: the GitRepo is synced once when it appears, and not polled on a timer afterwards.
TEST_F(PollerIntegrationTest, DisablePollingSkipsTimedPolls) {
  ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one").ok());
  ASSERT_TRUE(startFollowingApp(R"(,"disablePolling":true)"));
  ASSERT_TRUE(waitFor([&] { return status("app") && !status("app")->commit.empty(); }));
  EXPECT_EQ(status("app")->next_poll_time, "");
  ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 2\n"}}, "two").ok());
  std::this_thread::sleep_for(seconds(3));
  EXPECT_EQ(commitCount(), 1u);
  EXPECT_EQ(metric("polls_total", {{"outcome", "unchanged"}}) + metric("polls_total", {{"outcome", "published"}}), 1);
}

// NATS restarts: the poller reconnects, its KV watch keeps (or resumes) delivering new GitRepos, and publishing
// continues.
TEST_F(PollerIntegrationTest, SurvivesANatsRestart) {
  ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one").ok());
  ASSERT_TRUE(startFollowingApp());
  Poller& poller = *pollers_.back();

  ASSERT_TRUE(nats_->restart().ok());
  ASSERT_TRUE(waitFor([&] {
    std::string why;
    return poller.ready(why);
  }));
  ASSERT_TRUE(waitFor([&] {
    return hub_.gitrepos->put(events::gitRepoKey(kWs, "two"), gitRepoJson("two", git_->httpUrl("app"))).ok();
  }));
  ASSERT_TRUE(waitFor([&] { return commitCount() == 2; }, seconds(30)));
  auto second = git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 2\n"}}, "two");
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(waitFor([&] { return commitCount() == 4; }, seconds(30)));
}

// Mirror directories no GitRepo uses (left from GitRepos deleted while the poller was down) are removed once
// the initial GitRepos are loaded; an unusable directory of a mirror in use is recreated.
TEST_F(PollerIntegrationTest, OrphanMirrorsAreRemovedAtStartup) {
  ASSERT_TRUE(git_->commitFiles("app", "main", {{"simple/a.yaml", "v: 1\n"}}, "one").ok());
  putGitRepo("app", gitRepoJson("app", git_->httpUrl("app")));
  std::filesystem::create_directories(data_dir_ + "/mirrors/" + std::string(64, '0') + "/objects");
  // The used mirror's directory is garbage (say, a crash during the first clone): it is recreated.
  const std::string used = data_dir_ + "/mirrors/" + mirrorId(git_->httpUrl("app"));
  std::filesystem::create_directories(used);
  ASSERT_TRUE(writeFile(used + "/garbage", "not a repository").ok());
  startPoller();
  ASSERT_TRUE(waitFor([&] { return commitCount() == 1; }));
  ASSERT_TRUE(waitFor([&] { return mirrorDirs() == 1; }));
  EXPECT_TRUE(std::filesystem::exists(used + "/HEAD"));
  EXPECT_FALSE(std::filesystem::exists(used + "/garbage"));
  EXPECT_EQ(metric("mirrors_removed_total"), 1);
  EXPECT_EQ(metric("errors_total", {{"stage", "mirror"}, {"kind", "Internal"}}), 1);
}

}  // namespace
}  // namespace flotilla::poller

// End-to-end: the public CloudEvents as another system sees them (issue 17, docs/events/subscribing.md), on a secure
// hub (operator mode, TLS). The `nats` CLI (natscli, pinned in tools/versions.env, built by scripts/setup) — a
// client Flotilla did not write — subscribes to FLOTILLA_EVENTS with the readonly credentials and receives the
// events of one commit flowing to both clusters, each counted: the GitRepo's commit, the bundle rendered, the
// bundle's roll-up (Ready 2 of 2, never a Ready of fewer than it targets) and each cluster's deployment scheduled
// and Ready. `flotilla events` replays the same stream with the readonly credentials (--since, --type, -o text)
// and follows it (-f) until SIGINT.
#include <csignal>
#include <filesystem>

#include "flotilla/core/process.h"
#include "flotilla/core/time.h"
#include "flotilla/core/util.h"
#include "shared_hub_test.h"

namespace flotilla::e2e {
namespace {

class EventsTest : public SharedHubTest<EventsTest> {
 public:
  static HubOptions hubOptions() { return {.secure = true}; }
};

//! Every CloudEvent in `text`, one JSON object per line; other lines (a client's own log) are skipped.
std::vector<Json> cloudEventsIn(const std::string& text) {
  std::vector<Json> out;
  for (const auto& line : split(text, '\n')) {
    auto json = Json::parse(line);
    if (json.ok() && json->isObject() && json->getString("specversion") == "1.0") {
      out.push_back(std::move(json).value());
    }
  }
  return out;
}

//! The events of `type` about `subject` (the CloudEvent's subject: "<ws>/<gitrepo>", "<cluster>/<bundle>", ...).
std::vector<Json> about(const std::vector<Json>& events, std::string_view type, std::string_view subject) {
  std::vector<Json> out;
  for (const auto& event : events) {
    if (event.getString("type") == type && event.getString("subject") == subject) {
      out.push_back(event);
    }
  }
  return out;
}

std::string fileText(const std::string& path) {
  auto text = readFile(path);
  return text.ok() ? *text : std::string();
}

//! The `nats` CLI's command line with the readonly identity's flags (credentials, CA, its inbox prefix), then `args`.
Result<std::vector<std::string>> natsAsReadonly(Hub& hub, const std::vector<std::string>& args) {
  const std::string nats = envOr("FLOTILLA_TOOLS_DIR", std::string(FLOTILLA_SOURCE_DIR) + "/.tools/bin") + "/nats";
  if (!std::filesystem::exists(nats)) {
    return fail(ErrorKind::kNotFound, nats + " is missing: scripts/setup builds it (NATSCLI_VERSION)");
  }
  std::vector<std::string> argv = {nats,
                                   "--server",
                                   hub.natsUrl(),
                                   "--creds",
                                   hub.authDir() + "/creds/readonly.creds",
                                   "--tlsca",
                                   hub.authDir() + "/tls/ca.pem",
                                   "--inbox-prefix",
                                   "_INBOX.readonly"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

//! The `nats` CLI as the readonly identity, following the whole events stream into `output` (--raw: each message's
//! data on a line of its own).
Result<Process> startNatsSub(Hub& hub, const std::string& output) {
  auto argv = natsAsReadonly(hub, {"sub", "--stream", "FLOTILLA_EVENTS", "--all", "--raw", "flotilla.events.>"});
  FLOTILLA_TRY(argv);
  return Process::start({.argv = *argv, .output_file = output});
}

//! `flotilla <args>` with the readonly identity.
Result<CommandResult> readonlyCli(Hub& hub, std::vector<std::string> args) {
  std::vector<std::string> argv = {Binaries::fromBuild().cli, "--nats-url", hub.natsUrl()};
  for (auto& flag : hub.natsFlags("readonly")) {
    argv.push_back(std::move(flag));
  }
  argv.insert(argv.end(), args.begin(), args.end());
  return runCommand({.argv = argv, .timeout = std::chrono::seconds(60)});
}

TEST_F(EventsTest, TheNatsCliReceivesTheEventsOfOneCommitWithTrueCounts) {
  const std::string output = hub().dir() + "/nats-sub-" + randomHex(3) + ".out";
  auto subscriber = startNatsSub(hub(), output);
  ASSERT_TRUE(subscriber.ok()) << subscriber.error().describe();

  // Both agents registered (their events are in the stream) before the commit: then the bundle targets two clusters
  // from its first roll-up on. (Rendered before any registration, it would truthfully be `notargets` first.)
  auto registered = [&](const std::vector<Json>& events, const std::string& cluster) {
    for (const auto& event : events) {
      const std::string subject = event.getString("subject");
      if (event.getString("type") == "io.flotilla.cluster.registered" &&
          (subject == cluster || subject.ends_with("/" + cluster))) {
        return true;
      }
    }
    return false;
  };
  ASSERT_TRUE(Hub::waitFor(
      [&] {
        auto events = cloudEventsIn(fileText(output));
        return registered(events, hub().clusterName(0)) && registered(events, hub().clusterName(1));
      },
      kLands))
      << "the nats CLI got:\n"
      << fileText(output);

  const std::string name = "events-" + randomHex(3);
  auto commit = applyConfigMapRepo(hub(), name);
  ASSERT_TRUE(commit.ok()) << commit.error().describe();
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub(), name, *commit, clusters()); }, kLands))
      << name << " not Ready";
  const std::string bundle = qualified(bundleId(name, "app"));
  auto everyEventIn = [&] {
    auto events = cloudEventsIn(fileText(output));
    bool deployed = true;
    for (const auto& cluster : clusters()) {
      const std::string deployment = cluster + "/" + bundleId(name, "app");
      deployed = deployed && !about(events, "io.flotilla.bundledeployment.scheduled", deployment).empty() &&
                 !about(events, "io.flotilla.bundledeployment.ready", deployment).empty();
    }
    return deployed && !about(events, "io.flotilla.gitrepo.commit", qualified(name)).empty() &&
           !about(events, "io.flotilla.bundle.rendered", bundle).empty() &&
           !about(events, "io.flotilla.bundle.ready", bundle).empty();
  };
  ASSERT_TRUE(Hub::waitFor(everyEventIn, kLands)) << "the nats CLI got:\n" << fileText(output);
  subscriber->stop();
  const auto events = cloudEventsIn(fileText(output));

  auto commits = about(events, "io.flotilla.gitrepo.commit", qualified(name));
  ASSERT_EQ(commits.size(), 1u) << "one event per commit (a second announcement is dropped by its Msg-Id)";
  EXPECT_EQ(commits[0].getString("source"), "/flotilla/poller");
  EXPECT_EQ(commits[0].find("data")->getString("commit"), *commit);
  auto rendered = about(events, "io.flotilla.bundle.rendered", bundle);
  ASSERT_EQ(rendered.size(), 1u);
  EXPECT_EQ(rendered[0].getString("source"), "/flotilla/bundler");
  EXPECT_EQ(rendered[0].find("data")->getString("commit"), *commit);
  EXPECT_TRUE(about(events, "io.flotilla.bundle.notargets", bundle).empty()) << "both clusters were registered";
  for (const auto& ready : about(events, "io.flotilla.bundle.ready", bundle)) {
    const Json* summary = ready.find("data")->find("summary");
    EXPECT_EQ(summary->getInt("desiredReady"), 2) << ready.dump();
    EXPECT_EQ(summary->getInt("ready"), 2) << ready.dump();
  }
  for (const auto& cluster : clusters()) {
    const std::string deployment = cluster + "/" + bundleId(name, "app");
    EXPECT_EQ(about(events, "io.flotilla.bundledeployment.scheduled", deployment).size(), 1u) << deployment;
    auto reports = about(events, "io.flotilla.bundledeployment.ready", deployment);
    ASSERT_FALSE(reports.empty()) << deployment;
    EXPECT_EQ(reports.back().find("data")->getString("state"), "Ready");
  }
}

// `flotilla events` with the readonly identity: a replay by type and time, the text form, and -f following a new
// commit until SIGINT (exit 0).
TEST_F(EventsTest, FlotillaEventsReplaysByTypeAndTimeAndFollows) {
  const std::string name = "replay-" + randomHex(3);
  auto commit = applyConfigMapRepo(hub(), name);
  ASSERT_TRUE(commit.ok()) << commit.error().describe();
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub(), name, *commit, clusters()); }, kLands));
  const std::string gitrepo = qualified(name);
  ASSERT_TRUE(Hub::waitFor(
      [&] {
        auto all = readonlyCli(hub(), {"events", "--type", "io.flotilla.gitrepo.commit"});
        return all.ok() && !about(cloudEventsIn(all->out), "io.flotilla.gitrepo.commit", gitrepo).empty();
      },
      kLands));

  auto bundles = readonlyCli(hub(), {"events", "--type", "io.flotilla.bundle.*", "--since", "1h"});
  ASSERT_TRUE(bundles.ok());
  ASSERT_EQ(bundles->exit_code, 0) << bundles->err;
  auto replayed = cloudEventsIn(bundles->out);
  ASSERT_FALSE(replayed.empty());
  for (const auto& event : replayed) {
    EXPECT_TRUE(event.getString("type").starts_with("io.flotilla.bundle.")) << event.dump();
  }
  EXPECT_EQ(about(replayed, "io.flotilla.bundle.rendered", qualified(bundleId(name, "app"))).size(), 1u);
  size_t lines = 0;
  for (const auto& line : split(bundles->out, '\n')) {
    lines += line.empty() ? 0 : 1;
  }
  EXPECT_EQ(lines, replayed.size()) << "one CloudEvent per line:\n" << bundles->out;

  auto text = readonlyCli(hub(), {"events", "--type", "io.flotilla.gitrepo.commit", "-o", "text"});
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->out.find("io.flotilla.gitrepo.commit  " + gitrepo + "  commit=" + *commit), std::string::npos)
      << text->out;

  // Since now, after every event of this GitRepo's commit: neither its commit nor its render.
  auto none = readonlyCli(hub(), {"events", "--since", formatRfc3339(std::chrono::system_clock::now())});
  ASSERT_TRUE(none.ok());
  ASSERT_EQ(none->exit_code, 0) << none->err;
  auto after = cloudEventsIn(none->out);
  EXPECT_TRUE(about(after, "io.flotilla.gitrepo.commit", gitrepo).empty()) << none->out;
  EXPECT_TRUE(about(after, "io.flotilla.bundle.rendered", qualified(bundleId(name, "app"))).empty()) << none->out;

  // -f: once the replay has printed the first commit, a second commit's event arrives while it follows; SIGINT ends
  // it with 0.
  const std::string followed = hub().dir() + "/events-follow-" + randomHex(3) + ".out";
  std::vector<std::string> argv = {Binaries::fromBuild().cli, "--nats-url", hub().natsUrl()};
  for (auto& flag : hub().natsFlags("readonly")) {
    argv.push_back(std::move(flag));
  }
  for (const char* arg : {"events", "-f", "--since", "1h", "--type", "io.flotilla.gitrepo.*", "-o", "text"}) {
    argv.emplace_back(arg);
  }
  auto follower = Process::start({.argv = argv, .output_file = followed});
  ASSERT_TRUE(follower.ok()) << follower.error().describe();
  auto printed = [&](const std::string& sha) {
    return fileText(followed).find("io.flotilla.gitrepo.commit  " + gitrepo + "  commit=" + sha) != std::string::npos;
  };
  ASSERT_TRUE(Hub::waitFor([&] { return printed(*commit); }, kLands)) << fileText(followed);
  auto second = hub().git().commitFiles(name, "main", {{"app/cm.yaml", configMap("c", "v2")}}, "second");
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(Hub::waitFor([&] { return printed(*second); }, kLands)) << fileText(followed);
  EXPECT_TRUE(follower->running()) << "-f keeps following";
  follower->signal(SIGINT);
  EXPECT_EQ(follower->wait(std::chrono::seconds(30)), std::optional<int>(0)) << fileText(followed);
}

// A durable consumer of its own, as docs/events/subscribing.md describes it, with the readonly identity and the nats
// CLI: created once, each `consumer next` acknowledges one event, and the next call resumes after it.
TEST_F(EventsTest, AReadonlyDurableConsumerResumesAfterWhatItAcknowledged) {
  const std::string name = "durable-" + randomHex(3);
  auto first = applyConfigMapRepo(hub(), name);
  ASSERT_TRUE(first.ok()) << first.error().describe();
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub(), name, *first, clusters()); }, kLands));
  auto second = hub().git().commitFiles(name, "main", {{"app/cm.yaml", configMap("c", "v2")}}, "second");
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(Hub::waitFor([&] { return readyEverywhere(hub(), name, *second, clusters()); }, kLands));

  auto run = [&](const std::vector<std::string>& args) {
    auto argv = natsAsReadonly(hub(), args);
    EXPECT_TRUE(argv.ok()) << (argv.ok() ? "" : argv.error().describe());
    auto ran = argv.ok() ? runCommand({.argv = *argv, .timeout = std::chrono::seconds(60)})
                         : Result<CommandResult>(fail(argv.error()));
    EXPECT_TRUE(ran.ok() && ran->exit_code == 0) << (ran.ok() ? ran->out + ran->err : ran.error().describe());
    return ran.ok() ? ran->out : std::string();
  };
  const std::string consumer = "chatops-" + randomHex(3);
  run({"consumer", "add", "FLOTILLA_EVENTS", consumer, "--pull", "--filter",
       "flotilla.events.gitrepo.fleet-default." + name, "--deliver", "all", "--ack", "explicit", "--defaults"});
  auto commitOf = [](const std::string& out) {
    auto events = cloudEventsIn(out);
    return events.size() == 1 ? events[0].find("data")->getString("commit") : "got: " + out;
  };
  EXPECT_EQ(commitOf(run({"consumer", "next", "FLOTILLA_EVENTS", consumer, "--raw"})), *first);
  EXPECT_EQ(commitOf(run({"consumer", "next", "FLOTILLA_EVENTS", consumer, "--raw"})), *second);
}

// Bad flag values are refused before anything is read, naming the flag (exit 2).
TEST_F(EventsTest, BadFlagValuesAreRefusedNamingTheFlag) {
  auto since = readonlyCli(hub(), {"events", "--since", "last tuesday"});
  ASSERT_TRUE(since.ok());
  EXPECT_EQ(since->exit_code, 2);
  EXPECT_NE(since->err.find("--since: expected a duration"), std::string::npos) << since->err;
  auto type = readonlyCli(hub(), {"events", "--type", "bundle.ready"});
  ASSERT_TRUE(type.ok());
  EXPECT_EQ(type->exit_code, 2);
  EXPECT_NE(type->err.find("--type: expected a type"), std::string::npos) << type->err;
}

}  // namespace
}  // namespace flotilla::e2e

// Unit tests of the CLI's pure parts: kind names, ages, views and tables built from an in-memory snapshot, and
// usage errors that never touch NATS.
#include <sstream>

#include <gtest/gtest.h>

#include "flotilla/cli/cli.h"
#include "flotilla/cli/views.h"
#include "flotilla/events/subjects.h"
#include "flotilla/model/codec.h"
#include "run_captured.h"

namespace flotilla::cli {
namespace {

using namespace std::chrono_literals;

TEST(CliViewsTest, ParsesKindsAndAliases) {
  EXPECT_EQ(parseKind("gitrepos").value(), Kind::kGitRepo);
  EXPECT_EQ(parseKind("GitRepo").value(), Kind::kGitRepo);
  EXPECT_EQ(parseKind("gitrepos.fleet.cattle.io").value(), Kind::kGitRepo);
  EXPECT_EQ(parseKind("bd").value(), Kind::kBundleDeployment);
  EXPECT_EQ(parseKind("clustergroups").value(), Kind::kClusterGroup);
  EXPECT_FALSE(parseKind("pods").ok());
  EXPECT_FALSE(parseKind("gitrepos.example.com").ok());
  EXPECT_EQ(qualifiedKind(Kind::kGitRepo), "gitrepo.fleet.cattle.io");
}

TEST(CliViewsTest, Ages) {
  auto now = std::chrono::system_clock::from_time_t(1'800'000'000);
  EXPECT_EQ(age("", now), "-");
  EXPECT_EQ(age("garbage", now), "-");
  std::time_t t = 1'800'000'000 - 30;
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S.000Z", std::gmtime(&t));
  EXPECT_EQ(age(buf, now), "30s");
  t = 1'800'000'000 - 3 * 86400;
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  EXPECT_EQ(age(buf, now), "3d");
  // RFC 3339 as libs/core reads it: an offset counts, a time without one is not a time.
  EXPECT_EQ(age("2027-01-15T09:50:00+02:00", now), "10m");
  EXPECT_EQ(age("2027-01-15T07:50:00", now), "-");
}

Snapshot sampleSnapshot() {
  Snapshot snap;
  auto gitrepo = model::decodeGitRepo(Json::parse(R"({"apiVersion":"fleet.cattle.io/v1alpha1","kind":"GitRepo",
      "metadata":{"name":"demo","namespace":"fleet-default"},"spec":{"repo":"https://git.example/demo","paths":["app"]}})")
                                          .value());
  snap.gitrepos.push_back(gitrepo.value());
  snap.poll_statuses[events::gitRepoStatusKey("fleet-default", "demo")] =
      events::PollStatus{.workspace = "fleet-default", .gitrepo = "demo", .commit = "0123456789abcdef"};
  for (const char* cluster : {"c1", "c2"}) {
    snap.deployments.push_back(events::DeploymentRecord{.cluster = cluster,
                                                        .workspace = "fleet-default",
                                                        .bundle = "demo-app",
                                                        .gitrepo = "demo",
                                                        .deployment_id = "aaaa:bbbb",
                                                        .generation = 1});
  }
  snap.bd_statuses[events::deploymentKey("c1", "fleet-default", "demo-app")] =
      events::BdStatus{.cluster = "c1",
                       .workspace = "fleet-default",
                       .bundle = "demo-app",
                       .deployment_id = "aaaa:bbbb",
                       .generation = 1,
                       .state = "NotReady",
                       .message = "1 of 3 replicas"};
  return snap;
}

// Bundles and bundle deployments come from the records even before the scheduler wrote a summary.
TEST(CliViewsTest, ViewsFromRecords) {
  auto snap = sampleSnapshot();
  auto bds = listViews(snap, Kind::kBundleDeployment, {});
  ASSERT_EQ(bds.size(), 2u);
  EXPECT_EQ(bds[0].at({"status", "state"})->asString(), "NotReady");
  EXPECT_EQ(bds[1].at({"status", "state"})->asString(), "WaitApplied");
  EXPECT_EQ(listViews(snap, Kind::kBundleDeployment, {.name = "c2/demo-app"}).size(), 1u);
  EXPECT_EQ(listViews(snap, Kind::kBundleDeployment, {.name = "c1"}).size(), 1u);

  // Without a stored summary the bundle is listed (from its deployments) but no roll-up is made up.
  auto bundles = listViews(snap, Kind::kBundle, {});
  ASSERT_EQ(bundles.size(), 1u);
  EXPECT_EQ(bundles[0].at({"status", "display", "state"})->asString(), "");
  EXPECT_EQ(bundles[0].at({"status", "gitrepo"})->asString(), "demo");
  EXPECT_EQ(bundles[0].at({"status", "deployments"})->size(), 2u);

  auto gitrepos = listViews(snap, Kind::kGitRepo, {.workspace = "fleet-default"});
  ASSERT_EQ(gitrepos.size(), 1u);
  EXPECT_EQ(gitrepos[0].at({"status", "commit"})->asString(), "0123456789abcdef");
  EXPECT_TRUE(listViews(snap, Kind::kGitRepo, {.workspace = "other"}).empty());

  std::string table = renderTable(Kind::kBundleDeployment, bds, false, std::chrono::system_clock::now());
  EXPECT_NE(table.find("CLUSTER"), std::string::npos);
  EXPECT_NE(table.find("1 of 3 replicas"), std::string::npos);
  std::string repos = renderTable(Kind::kGitRepo, gitrepos, true, std::chrono::system_clock::now());
  EXPECT_NE(repos.find("WORKSPACE"), std::string::npos);
  EXPECT_NE(repos.find("01234567"), std::string::npos);
  EXPECT_NE(repos.find("https://git.example/demo"), std::string::npos);
}

// Roll-ups are the summaries the scheduler stored, shown as they are (not recomputed from the deployments).
TEST(CliViewsTest, ShowsStoredSummaries) {
  auto snap = sampleSnapshot();
  snap.bundle_summaries[events::bundleSummaryKey("fleet-default", "demo-app")] =
      events::BundleSummary{.workspace = "fleet-default",
                            .bundle = "demo-app",
                            .summary = Json::obj({{"ready", 2}, {"desiredReady", 2}}),
                            .state = "Ready",
                            .ready_clusters = "2/2",
                            .gitrepo = "demo",
                            .manifest_id = "aaaa"};
  snap.gitrepo_summaries[events::gitRepoSummaryKey("fleet-default", "demo")] =
      events::GitRepoSummary{.workspace = "fleet-default",
                             .gitrepo = "demo",
                             .state = "Modified",
                             .message = "Modified(1)",
                             .ready_bundle_deployments = "1/2"};
  auto bundles = listViews(snap, Kind::kBundle, {});
  ASSERT_EQ(bundles.size(), 1u);
  EXPECT_EQ(bundles[0].at({"status", "display", "state"})->asString(), "Ready");
  EXPECT_EQ(bundles[0].at({"status", "display", "readyClusters"})->asString(), "2/2");
  EXPECT_EQ(bundles[0].at({"status", "summary", "ready"})->asInt(), 2);
  auto gitrepos = listViews(snap, Kind::kGitRepo, {});
  ASSERT_EQ(gitrepos.size(), 1u);
  EXPECT_EQ(gitrepos[0].at({"status", "display", "state"})->asString(), "Modified");
  EXPECT_EQ(gitrepos[0].at({"status", "display", "readyBundleDeployments"})->asString(), "1/2");
  std::string text = describeView(snap, Kind::kGitRepo, gitrepos[0], std::chrono::system_clock::now());
  EXPECT_NE(text.find("Modified(1)"), std::string::npos) << text;
}

// describe bundle prints the rollout the scheduler stored: state, budgets, partitions and who halts it.
TEST(CliViewsTest, DescribeBundleShowsTheRollout) {
  auto snap = sampleSnapshot();
  events::RolloutStatus rollout{
      .state = "Halted",
      .partition = "canary",
      .unavailable = 1,
      .max_unavailable = 3,
      .max_new = 50,
      .held = 2,
      .partitions = {{.name = "canary", .count = 2, .max_unavailable = 1, .unavailable = 2, .state = "Halted"},
                     {.name = "prod", .count = 1, .max_unavailable = 1, .state = "Waiting"}},
      .halted_by = {{.cluster = "c-1", .state = "ErrApplied", .message = "it broke"}}};
  snap.bundle_summaries[events::bundleSummaryKey("fleet-default", "demo-app")] =
      events::BundleSummary{.workspace = "fleet-default",
                            .bundle = "demo-app",
                            .state = "ErrApplied",
                            .ready_clusters = "2/3",
                            .gitrepo = "demo",
                            .rollout = rollout};
  auto bundles = listViews(snap, Kind::kBundle, {});
  ASSERT_EQ(bundles.size(), 1u);
  EXPECT_EQ(bundles[0].at({"status", "rollout", "state"})->asString(), "Halted");
  std::string text = describeView(snap, Kind::kBundle, bundles[0], std::chrono::system_clock::now());
  EXPECT_NE(text.find("Halted at partition canary"), std::string::npos) << text;
  EXPECT_NE(text.find("canary: Halted, 2 of 2 unavailable (max 1)"), std::string::npos) << text;
  EXPECT_NE(text.find("prod: Waiting"), std::string::npos) << text;
  EXPECT_NE(text.find("c-1: ErrApplied - it broke"), std::string::npos) << text;
}

//! Runs the command line without NATS; returns the exit code and leaves stderr in `err_text`.
int run(const std::vector<std::string>& args, std::string& err_text) {
  Ran ran = runCaptured(args);
  err_text = ran.err;
  return ran.code;
}

// Usage problems exit 2 without contacting NATS.
TEST(CliUsageTest, UsageErrorsExitTwo) {
  std::string err;
  EXPECT_EQ(run({}, err), kExitUsage);
  EXPECT_EQ(run({"frobnicate"}, err), kExitUsage);
  EXPECT_NE(err.find("unknown command"), std::string::npos);
  EXPECT_EQ(run({"get"}, err), kExitUsage);
  EXPECT_EQ(run({"get", "pods"}, err), kExitUsage);
  EXPECT_EQ(run({"apply"}, err), kExitUsage);
  EXPECT_EQ(run({"get", "gitrepos", "-o", "xml"}, err), kExitUsage);
  EXPECT_EQ(run({"get", "gitrepos", "--bogus"}, err), kExitUsage);
  EXPECT_NE(err.find("unknown flag --bogus"), std::string::npos) << err;
  EXPECT_EQ(run({"get", "gitrepos", "a", "b"}, err), kExitUsage);
  EXPECT_NE(err.find("unexpected argument \"b\""), std::string::npos) << err;
  EXPECT_EQ(run({"describe", "gitrepos"}, err), kExitUsage);  // the name is missing
  EXPECT_EQ(run({"--nats-url"}, err), kExitUsage);            // a flag without its value
  EXPECT_EQ(run({"--timeout", "soon", "get", "gitrepos"}, err), kExitUsage);
  EXPECT_EQ(run({"--help"}, err), kExitOk);
}

// -o and -n are checked against the command: an unknown format, or a flag the command has no use for, is a usage
// error naming the flag and the command.
TEST(CliUsageTest, GlobalFlagsTheCommandCannotUseAreRejected) {
  std::string err;
  EXPECT_EQ(run({"-o", "xml", "get", "gitrepos"}, err), kExitUsage);
  EXPECT_NE(err.find("-o: get prints table, wide, json or yaml, got \"xml\""), std::string::npos) << err;
  EXPECT_EQ(run({"describe", "gitrepo", "x", "-o", "json"}, err), kExitUsage);
  EXPECT_NE(err.find("describe has no output format"), std::string::npos) << err;
  EXPECT_EQ(run({"delete", "gitrepo", "x", "-oyaml"}, err), kExitUsage);
  EXPECT_EQ(run({"force-sync", "x", "--output=json"}, err), kExitUsage);
  EXPECT_EQ(run({"apply", "-f", "x.yaml", "-n", "ws"}, err), kExitUsage);
  EXPECT_NE(err.find("-n does not apply to apply"), std::string::npos) << err;
  EXPECT_EQ(run({"completion", "bash", "-n", "ws"}, err), kExitUsage);
  EXPECT_EQ(run({"completion", "bash", "--nats-url", "nats://x:4222"}, err), kExitUsage);
}

// Each command has its own help; `help <command>` prints the same.
TEST(CliUsageTest, PerCommandHelp) {
  Ran get = runCaptured({"get", "--help"});
  ASSERT_EQ(get.code, kExitOk);
  EXPECT_NE(get.out.find("Usage: flotilla get"), std::string::npos) << get.out;
  EXPECT_NE(get.out.find("table, wide, json or yaml"), std::string::npos) << get.out;
  Ran help = runCaptured({"help", "get"});
  ASSERT_EQ(help.code, kExitOk);
  EXPECT_EQ(help.out, get.out);
  Ran apply = runCaptured({"apply", "-h"});
  ASSERT_EQ(apply.code, kExitOk);
  EXPECT_NE(apply.out.find("-f,--filename"), std::string::npos) << apply.out;
  EXPECT_EQ(apply.out.find("--output"), std::string::npos) << apply.out;
}

}  // namespace
}  // namespace flotilla::cli

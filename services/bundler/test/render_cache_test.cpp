// The render cache against a real nats-server (services/bundler/README.md "Render cache"): a bundle whose inputs
// did not change is not rendered again, and every input that is not in its directory still counts.
#include "bundler_fixture.h"
#include "chart_repo.h"
#include "flotilla/core/clock.h"
#include "flotilla/render/external_renderers.h"
#include "test_util.h"

namespace flotilla::bundler {
namespace {

using namespace std::chrono_literals;
using namespace flotilla::bundler::bundler_test;

class RenderCacheTest : public BundlerIntegrationTest {
 protected:
  double cache(const std::string& result, const std::string& reason = "") {
    prometheus::Labels labels = {{"result", result}};
    if (!reason.empty()) {
      labels["reason"] = reason;
    }
    return metrics_.value("render_cache_total", labels);
  }

  //! Publishes `files` at `commit` and reads its `count` BundleEvents once the commit is handled (the n-th).
  std::vector<events::BundleEvent> handleCommit(const std::string& commit,
                                                const std::map<std::string, std::string>& files, size_t count,
                                                int nth) {
    publishCommit(commit, files, {"apps/*"});
    auto events = readEvents(count);
    EXPECT_EQ(events.size(), count);
    EXPECT_TRUE(eventually([&] { return metrics_.value("commits_handled_total", {{"outcome", "rendered"}}) == nth; }));
    return events;
  }

  //! The record of `bundle` as stored, without its renderKey: what a bundler before the render cache wrote.
  void dropRenderKey(const std::string& bundle) {
    auto entry = hub_.bundles->get(events::bundleKey(ws_, bundle));
    ASSERT_TRUE(entry.ok());
    auto json = Json::parse(entry->value);
    ASSERT_TRUE(json.ok());
    ASSERT_TRUE(json->erase("renderKey"));
    ASSERT_TRUE(hub_.bundles->put(events::bundleKey(ws_, bundle), json->dump()).ok());
  }

  void useRenderers(const std::string& helm, const std::string& kustomize) {
    renderers_ = render::makeRenderers(render::RendererBinaries{.helm = helm, .kustomize = kustomize});
  }
};

const events::BundleEvent& named(const std::vector<events::BundleEvent>& events, const std::string& bundle) {
  static const events::BundleEvent kNone;
  for (const auto& event : events) {
    if (event.bundle == bundle) {
      return event;
    }
  }
  ADD_FAILURE() << "no event for " << bundle;
  return kNone;
}

TEST_F(RenderCacheTest, ACommitTouchingOneOfThreeBundlesRendersOnlyThatOne) {
  startBundler();
  auto first = handleCommit(kCommit1, threeBundles(), 3, 1);
  EXPECT_EQ(cache("miss"), 3);
  const std::string api_key = record("repo-apps-api")->render_key;
  EXPECT_EQ(api_key.size(), 64u);

  auto files = threeBundles();
  files["apps/web/cm.yaml"] = configMap("web-a", "changed");
  auto second = handleCommit(kCommit2, files, 3, 2);
  EXPECT_EQ(cache("hit"), 2);
  EXPECT_EQ(cache("miss"), 4);
  EXPECT_EQ(metrics_.value("render_duration_seconds", {{"renderer", "raw"}}), 4) << "one render for the second commit";
  EXPECT_EQ(metrics_.value("manifest_puts_total", {{"result", "stored"}}), 4);
  EXPECT_EQ(metrics_.value("manifest_puts_total", {{"result", "existing"}}), 0);
  for (const char* name : {"repo-apps-api", "repo-apps-db"}) {
    // The new commit, the same manifest: the scheduler moves the record along without a deploy.
    const auto& before = named(first, name);
    const auto& after = named(second, name);
    EXPECT_EQ(after.commit, kCommit2) << name;
    EXPECT_EQ(after.manifest_id, before.manifest_id) << name;
    EXPECT_EQ(after.options, before.options) << name;
    EXPECT_EQ(after.targets, before.targets) << name;
    EXPECT_EQ(after.labels, before.labels) << name;
    EXPECT_GT(after.commit_sequence, before.commit_sequence) << name;
    EXPECT_NE(after.id, before.id) << name;
    auto rec = record(name);
    ASSERT_TRUE(rec && rec->last_good) << name;
    EXPECT_EQ(rec->commit, kCommit2);
    EXPECT_EQ(rec->last_good->id, after.id);
    EXPECT_EQ(rec->render_key.size(), 64u);
    EXPECT_EQ(renderStatus(name)->commit, kCommit2);
    EXPECT_EQ(renderStatus(name)->manifest_id, before.manifest_id);
  }
  EXPECT_EQ(record("repo-apps-api")->render_key, api_key);
  EXPECT_NE(named(second, "repo-apps-web").manifest_id, named(first, "repo-apps-web").manifest_id);
  EXPECT_EQ(named(second, "repo-apps-web").commit, kCommit2);
  expectNoMoreEvents();
}

// A customization's own manifest is kept by garbage collection because the bundle's record names it; one gone all
// the same (collected by an older bundler) makes the bundle render (and store it) again rather than hit the cache.
TEST_F(RenderCacheTest, ACustomizationManifestIsKeptByItsRecordAndOneGoneIsRenderedAgain) {
  ManualClock clock(std::chrono::system_clock::now());
  BundlerOptions opts = options();
  opts.handler.clock = &clock;
  opts.handler.commit_budget = std::chrono::hours(24);
  bundler_ = std::make_unique<Bundler>(handlerBus(), renderers_, metrics_, opts);
  ASSERT_TRUE(bundler_->start().ok());
  auto files = threeBundles();
  files["apps/web/fleet.yaml"] =
      "defaultNamespace: web\ntargetCustomizations:\n- name: dev\n  clusterSelector: {matchLabels: {env: dev}}\n"
      "  yaml: {overlays: [dev]}\n";
  files["apps/web/overlays/dev/cm.yaml"] = configMap("web-dev");
  auto first = handleCommit(kCommit1, files, 3, 1);
  const auto& web = named(first, "repo-apps-web");
  ASSERT_EQ(web.customizations.size(), 1u);
  const std::string dev_manifest = web.customizations[0].manifest_id;
  ASSERT_NE(dev_manifest, web.manifest_id);

  clock.advance(std::chrono::hours(2));  // past the grace period: only what records name stays
  auto pass = bundler_->collectManifests();
  ASSERT_TRUE(pass.ok()) << pass.error().describe();
  // The record names the customization's manifest, so the pass keeps it although no deployment runs it.
  EXPECT_TRUE(hub_.manifests->info(dev_manifest).ok());
  for (const auto& event : first) {
    EXPECT_TRUE(hub_.manifests->info(event.manifest_id).ok()) << event.bundle;
  }
  // Collected by a bundler from before customizations counted as references: the hit is refused, the bundle
  // rendered (and the manifest stored) again.
  ASSERT_TRUE(hub_.manifests->purge(events::manifestObjectName(dev_manifest)).ok());
  ASSERT_EQ(hub_.manifests->info(dev_manifest).error().kind, ErrorKind::kNotFound);

  auto second = handleCommit(kCommit2, files, 3, 2);
  EXPECT_EQ(cache("hit"), 2);  // api and db
  EXPECT_EQ(cache("miss"), 4);
  EXPECT_EQ(named(second, "repo-apps-web").customizations[0].manifest_id, dev_manifest);
  EXPECT_TRUE(hub_.manifests->info(dev_manifest).ok());
  // The manifests the hits named survive a pass too (their records name them).
  clock.advance(std::chrono::hours(2));
  ASSERT_TRUE(bundler_->collectManifests().ok());
  for (const auto& event : second) {
    EXPECT_TRUE(hub_.manifests->info(event.manifest_id).ok()) << event.bundle;
  }
}

// (b) A Helm bundle whose values file lies outside its directory, and a kustomize bundle whose base does: changing
// that file renders the bundle again with it.
TEST_F(RenderCacheTest, AValuesFileOrBaseOutsideTheBundleRendersItAgainWhenItChanges) {
  REQUIRE_TOOL(helm, "helm");
  REQUIRE_TOOL(kustomize, "kustomize");
  useRenderers(helm, kustomize);
  startBundler();
  std::map<std::string, std::string> files = {
      {"apps/chart/fleet.yaml", "helm:\n  valuesFiles: [../../shared/values.yaml]\n"},
      {"apps/chart/Chart.yaml", "apiVersion: v2\nname: web\nversion: 0.1.0\nhome: https://example.com/web\n"},
      {"apps/chart/templates/cm.yaml",
       "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: greeting\ndata:\n  text: {{ .Values.greeting }}\n"},
      {"shared/values.yaml", "greeting: hello\n"},
      {"apps/kust/kustomization.yaml", "resources:\n- ../../base\n"},
      {"base/kustomization.yaml", "resources:\n- cm.yaml\n"},
      {"base/cm.yaml", configMap("base", "one")}};
  auto first = handleCommit(kCommit1, files, 2, 1);
  EXPECT_EQ(cache("miss"), 2);
  // The same inputs again: nothing is rendered.
  auto same = handleCommit(kCommit2, files, 2, 2);
  EXPECT_EQ(cache("hit"), 2);
  EXPECT_EQ(named(same, "repo-apps-chart").manifest_id, named(first, "repo-apps-chart").manifest_id);
  EXPECT_EQ(metrics_.value("render_duration_seconds", {{"renderer", "helm"}}), 1);

  files["shared/values.yaml"] = "greeting: bye\n";
  auto values = handleCommit(kCommit3, files, 2, 3);
  const auto& chart = named(values, "repo-apps-chart");
  EXPECT_NE(chart.manifest_id, named(first, "repo-apps-chart").manifest_id);
  EXPECT_NE(hub_.manifests->get(chart.manifest_id).value().find("bye"), std::string::npos);
  EXPECT_EQ(metrics_.value("render_duration_seconds", {{"renderer", "helm"}}), 2);

  files["base/cm.yaml"] = configMap("base", "two");
  auto base = handleCommit("4444444444444444444444444444444444444444", files, 2, 4);
  const auto& kust = named(base, "repo-apps-kust");
  EXPECT_NE(kust.manifest_id, named(first, "repo-apps-kust").manifest_id);
  EXPECT_NE(hub_.manifests->get(kust.manifest_id).value().find("two"), std::string::npos);
  EXPECT_EQ(cache("hit"), 2);
  EXPECT_EQ(cache("miss"), 6);
}

// (c) A kustomize bundle that uses another bundle's directory (../api) is rendered again when that one changes.
TEST_F(RenderCacheTest, ABundleUsingAnotherBundlesDirectoryRendersWhenItChanges) {
  REQUIRE_TOOL(kustomize, "kustomize");
  useRenderers("", kustomize);
  startBundler();
  std::map<std::string, std::string> files = {{"apps/web/kustomization.yaml", "resources:\n- ../api\n- cm.yaml\n"},
                                              {"apps/web/cm.yaml", configMap("web")},
                                              {"apps/api/kustomization.yaml", "resources:\n- svc.yaml\n"},
                                              {"apps/api/svc.yaml", configMap("api", "one")},
                                              {"apps/db/cm.yaml", configMap("db")}};
  auto first = handleCommit(kCommit1, files, 3, 1);
  files["apps/api/svc.yaml"] = configMap("api", "two");
  auto second = handleCommit(kCommit2, files, 3, 2);
  EXPECT_EQ(cache("hit"), 1);  // db only
  EXPECT_EQ(cache("miss"), 5);
  for (const char* name : {"repo-apps-web", "repo-apps-api"}) {
    EXPECT_NE(named(second, name).manifest_id, named(first, name).manifest_id) << name;
    EXPECT_NE(hub_.manifests->get(named(second, name).manifest_id).value().find("two"), std::string::npos) << name;
  }
  EXPECT_EQ(named(second, "repo-apps-db").manifest_id, named(first, "repo-apps-db").manifest_id);
}

// (c2) What a remote kustomize base names can change without a commit: such a bundle is rendered on every commit and
// keeps no key.
TEST_F(RenderCacheTest, ABundleNamingAUrlIsRenderedOnEveryCommit) {
  REQUIRE_TOOL(kustomize, "kustomize");
  useRenderers("", kustomize);
  startBundler();
  const std::map<std::string, std::string> files = {
      // Renders fine, but a kustomization with "://" may name a remote base: not cached (conservative).
      {"apps/web/kustomization.yaml", "resources:\n- cm.yaml\ncommonAnnotations:\n  docs: https://example.com/web\n"},
      {"apps/web/cm.yaml", configMap("web")},
      // A chart from a repository (helm is not configured here: an error event, uncacheable as an error).
      {"apps/remote/fleet.yaml", "helm:\n  repo: https://127.0.0.1:9/charts\n  chart: web\n"},
      {"apps/db/cm.yaml", configMap("db")}};
  auto first = handleCommit(kCommit1, files, 3, 1);
  auto second = handleCommit(kCommit2, files, 3, 2);
  EXPECT_EQ(cache("uncacheable", "remote"), 2);
  EXPECT_EQ(cache("uncacheable", "error"), 2);
  EXPECT_EQ(cache("hit"), 1);  // db
  EXPECT_EQ(metrics_.value("render_duration_seconds", {{"renderer", "kustomize"}}), 2);
  EXPECT_EQ(named(second, "repo-apps-web").manifest_id, named(first, "repo-apps-web").manifest_id);
  EXPECT_TRUE(named(second, "repo-apps-remote").error);
  EXPECT_TRUE(record("repo-apps-web")->render_key.empty());
  EXPECT_TRUE(record("repo-apps-remote")->render_key.empty());
}

// (d) A chart from a repository is resolved to its version and the index's digest before the cache is asked: the
// same chart is a hit; the same version published again, or a newer version the constraint takes, is a miss. An
// index naming no digest cannot identify the archive: the bundle is rendered on every commit ("unresolved").
TEST_F(RenderCacheTest, ARepositoryChartIsCachedUntilTheRepositoryChangesIt) {
  REQUIRE_TOOL(helm, "helm");
  render::testing::ChartRepo repo(helm, {});
  repo.publish("web", "1.0.0");
  useRenderers(helm, "");
  startBundler();
  std::map<std::string, std::string> files = {
      {"apps/remote/fleet.yaml", "helm:\n  repo: " + repo.url() + "\n  chart: web\n  version: ^1.0.0\n"},
      {"apps/db/cm.yaml", configMap("db")}};
  auto helmRenders = [&] { return metrics_.value("render_duration_seconds", {{"renderer", "helm"}}); };
  auto first = handleCommit(kCommit1, files, 2, 1);
  EXPECT_EQ(cache("miss"), 2);
  EXPECT_EQ(record("repo-apps-remote")->render_key.size(), 64u);
  EXPECT_FALSE(named(first, "repo-apps-remote").error);

  files["apps/db/cm.yaml"] = configMap("db", "changed");
  auto second = handleCommit(kCommit2, files, 2, 2);
  EXPECT_EQ(cache("hit"), 1) << "the chart: same version, same digest";
  EXPECT_EQ(helmRenders(), 1);
  EXPECT_EQ(named(second, "repo-apps-remote").manifest_id, named(first, "repo-apps-remote").manifest_id);

  repo.publish("web", "1.0.0", "description: published again\n");  // same version, another archive
  handleCommit(kCommit3, files, 2, 3);
  EXPECT_EQ(helmRenders(), 2);
  EXPECT_EQ(cache("hit"), 2) << "db";

  repo.publish("web", "1.1.0");
  auto newer = handleCommit("4444444444444444444444444444444444444444", files, 2, 4);
  EXPECT_EQ(helmRenders(), 3);
  const auto& chart = named(newer, "repo-apps-remote");
  EXPECT_NE(hub_.manifests->get(chart.manifest_id).value().find("1.1.0"), std::string::npos);

  repo.stripDigests();
  handleCommit("5555555555555555555555555555555555555555", files, 2, 5);
  EXPECT_EQ(cache("uncacheable", "unresolved"), 1);
  EXPECT_EQ(helmRenders(), 4) << "rendered all the same";
  EXPECT_TRUE(record("repo-apps-remote")->render_key.empty());
  handleCommit("6666666666666666666666666666666666666666", files, 2, 6);
  EXPECT_EQ(cache("uncacheable", "unresolved"), 2);
  EXPECT_EQ(helmRenders(), 5);
}

// (e) The GitRepo's spec and labels reach every render: a change renders every bundle again.
TEST_F(RenderCacheTest, AChangedGitRepoRendersEveryBundleAgain) {
  auto first = renderFirstCommit();
  ASSERT_EQ(first.size(), 3u);
  // The fixture's GitRepo with another label.
  auto entry = hub_.gitrepos->get(events::gitRepoKey(ws_, gitrepo_));
  ASSERT_TRUE(entry.ok());
  auto repo = model::decodeGitRepo(Json::parse(entry->value).value());
  ASSERT_TRUE(repo.ok());
  repo->metadata.labels["team"] = "mobile";
  ASSERT_TRUE(hub_.gitrepos->put(events::gitRepoKey(ws_, gitrepo_), model::encode(*repo).dump()).ok());
  auto second = handleCommit(kCommit2, threeBundles(), 3, 2);
  EXPECT_EQ(cache("hit"), 0);
  EXPECT_EQ(cache("miss"), 6);
  for (const auto& event : second) {
    EXPECT_EQ(event.labels.at("team"), "mobile") << event.bundle;
    EXPECT_EQ(event.manifest_id, named(first, event.bundle).manifest_id) << event.bundle;
  }
  handleCommit(kCommit3, threeBundles(), 3, 3);
  EXPECT_EQ(cache("hit"), 3);
}

// (f) A record written before the render cache (no renderKey) decodes, and its bundle is simply rendered.
TEST_F(RenderCacheTest, ARecordWithoutARenderKeyIsAMiss) {
  auto first = renderFirstCommit();
  ASSERT_EQ(first.size(), 3u);
  EXPECT_TRUE(eventually([&] { return metrics_.value("commits_handled_total", {{"outcome", "rendered"}}) == 1; }));
  for (const auto& event : first) {
    ASSERT_NO_FATAL_FAILURE(dropRenderKey(event.bundle));
    auto rec = record(event.bundle);
    ASSERT_TRUE(rec.has_value());
    EXPECT_TRUE(rec->render_key.empty());
  }
  auto second = handleCommit(kCommit2, threeBundles(), 3, 2);
  EXPECT_EQ(cache("hit"), 0);
  EXPECT_EQ(cache("miss"), 6);
  for (const auto& event : second) {
    EXPECT_EQ(event.manifest_id, named(first, event.bundle).manifest_id);
    EXPECT_EQ(record(event.bundle)->render_key.size(), 64u);
  }
  handleCommit(kCommit3, threeBundles(), 3, 3);
  EXPECT_EQ(cache("hit"), 3);
}

}  // namespace
}  // namespace flotilla::bundler

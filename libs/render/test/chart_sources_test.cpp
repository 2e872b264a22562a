// Helm chart sources against a real chart repository: `helm package` + `helm repo index` output served by a
// small HTTP(S) server (chart_repo_server.py, optionally TLS with a test CA and basic auth), with the pinned
// helm/kustomize from .tools/bin. Also Helm post-rendering by kustomize and the checkout-escape checks.
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "chart_repo.h"
#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/render/external_renderers.h"
#include "flotilla/render/render_bundle.h"
#include "test_util.h"

namespace flotilla::render {
namespace {

namespace fs = std::filesystem;
using testing::ChartRepo;
using testing::configMap;
using testing::runTool;
using testing::TempTree;

// A checkout whose root is <tmp>/src, like the handler's (scratch dirs go next to it).
class Checkout : public TempTree {
 public:
  Checkout() { mkdir("src"); }
  [[nodiscard]] std::string src() const { return root() + "/src"; }
  void add(const std::string& path, const std::string& content) const { write("src/" + path, content); }
};

RenderRequest request(const Checkout& checkout, const std::string& path, model::BundleDeploymentOptions options) {
  return RenderRequest{checkout.src(), path, "repo-app", std::move(options), RenderLimits{}};
}

model::BundleDeploymentOptions remoteChart(const std::string& repo, const std::string& chart,
                                           const std::string& version = "") {
  model::BundleDeploymentOptions options;
  options.helm = model::HelmOptions{};
  options.helm->repo = repo;
  options.helm->chart = chart;
  options.helm->version = version;
  return options;
}

//! app/: a local chart with its own ConfigMap and a dependency on dep 0.1.x from `repo_url`.
void addChartDependingOnDep(const Checkout& checkout, const std::string& repo_url) {
  checkout.add("app/Chart.yaml",
               "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n"
               "  - name: dep\n    version: \"0.1.x\"\n    repository: " +
                   repo_url + "\n");
  checkout.add("app/templates/own.yaml", configMap("own"));
}

const Json* byName(const std::vector<RenderedObject>& objects, const std::string& name) {
  for (const auto& o : objects) {
    if (o.object.at({"metadata", "name"})->asString() == name) {
      return &o.object;
    }
  }
  return nullptr;
}

size_t filesIn(const std::string& dir) {
  size_t count = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    count += it->path().extension() == ".tgz" ? 1 : 0;
  }
  return count;
}

TEST(ChartSources, RepositoryChartWithAVersionConstraintIsPulledAndCached) {
  REQUIRE_TOOL(helm, "helm");
  ChartRepo repo(helm, {});
  for (const char* version : {"1.0.0", "1.2.0", "2.0.0"}) {
    repo.publish("demo", version);
  }
  Checkout checkout;
  TempTree cache;
  HelmRenderer renderer(helm, HelmRendererOptions{.chart_cache_dir = cache.root() + "/charts"});

  RenderNotes notes;
  auto req = request(checkout, "app", remoteChart(repo.url(), "demo", "^1.0.0"));
  req.notes = &notes;
  auto objects = renderer.render(req);
  ASSERT_TRUE(objects.ok()) << objects.error().describe() << "\n" << repo.log();
  ASSERT_EQ(objects->size(), 1u);
  EXPECT_EQ((*objects)[0].object.at({"data", "version"})->asString(), "1.2.0");
  EXPECT_EQ((*objects)[0].object.at({"data", "release"})->asString(), "repo-app");
  EXPECT_EQ((*objects)[0].file, "demo-1.2.0/templates/cm.yaml");
  EXPECT_EQ(notes.chart, repo.url() + " demo");
  EXPECT_EQ(notes.chart_version, "1.2.0");
  EXPECT_EQ(notes.chart_digest.size(), 64u);
  EXPECT_EQ(notes.chart_source, "pulled");
  EXPECT_EQ(filesIn(cache.root() + "/charts"), 1u);

  // No constraint: the newest version.
  auto newest = renderer.render(request(checkout, "app", remoteChart(repo.url(), "demo")));
  ASSERT_TRUE(newest.ok()) << newest.error().describe();
  EXPECT_EQ((*newest)[0].object.at({"data", "version"})->asString(), "2.0.0");
  EXPECT_EQ(filesIn(cache.root() + "/charts"), 2u);

  // The cached archive is used: the repository no longer serves it, only its index names it.
  repo.removeArchive("demo-1.2.0.tgz");
  RenderNotes cached_notes;
  auto cached_request = request(checkout, "app", remoteChart(repo.url(), "demo", "~1.2"));
  cached_request.notes = &cached_notes;
  auto cached = renderer.render(cached_request);
  ASSERT_TRUE(cached.ok()) << cached.error().describe();
  EXPECT_EQ(cached_notes.chart_source, "cache");
  EXPECT_EQ((*cached)[0].object.at({"data", "version"})->asString(), "1.2.0");
  // ... and without a cache the same render fails: the archive is gone.
  auto uncached = HelmRenderer(helm).render(request(checkout, "app", remoteChart(repo.url(), "demo", "~1.2")));
  ASSERT_FALSE(uncached.ok());
  EXPECT_EQ(uncached.error().where, "app/fleet.yaml");

  auto missing = renderer.render(request(checkout, "app", remoteChart(repo.url(), "demo", "^3.0.0")));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(missing.error().where, "app/fleet.yaml");
  EXPECT_NE(missing.error().message.find("not found in the repository"), std::string::npos) << missing.error().message;
  auto unknown = renderer.render(request(checkout, "app", remoteChart(repo.url(), "nope")));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("\"nope\""), std::string::npos) << unknown.error().message;
}

TEST(ChartSources, HttpsWithBasicAuthUsesTheHelmSecretFromTheCredentialsDir) {
  REQUIRE_TOOL(helm, "helm");
  ChartRepo repo(helm, {.tls = true, .user = "chartuser", .password = "s3cret-chart-pw"});
  repo.publish("secure", "0.3.0");
  Checkout checkout;
  TempTree credentials;
  std::string ca = repo.caPem();
  ASSERT_FALSE(ca.empty());
  std::string indented;
  for (const auto& line : split(ca, '\n')) {
    indented += "    " + line + "\n";
  }
  credentials.write("fleet-default/helm-creds.yaml",
                    "apiVersion: v1\nkind: Secret\nmetadata: {name: helm-creds}\nstringData:\n"
                    "  username: chartuser\n  password: s3cret-chart-pw\n  cacerts: |\n" +
                        indented);
  credentials.write("fleet-default/no-ca.yaml", "username: chartuser\npassword: s3cret-chart-pw\n");
  credentials.write("fleet-default/wrong-password.yaml",
                    "username: chartuser\npassword: nope\ncacerts: |\n" + indented);
  HelmRenderer renderer(helm, HelmRendererOptions{.credentials_dir = credentials.root()});

  auto req = request(checkout, "app", remoteChart(repo.url(), "secure", "0.3.x"));
  req.helm_access = HelmRepoAccess{
      .secret_name = "helm-creds", .repo_url_regex = "^https://127\\.0\\.0\\.1:", .workspace = "fleet-default"};
  auto objects = renderer.render(req);
  ASSERT_TRUE(objects.ok()) << objects.error().describe() << "\n" << repo.log();
  EXPECT_EQ((*objects)[0].object.at({"data", "version"})->asString(), "0.3.0");

  auto expectFailure = [&](const HelmRepoAccess& access, const std::string& expected) {
    auto failing = request(checkout, "app", remoteChart(repo.url(), "secure"));
    failing.helm_access = access;
    auto result = renderer.render(failing);
    ASSERT_FALSE(result.ok()) << expected;
    EXPECT_EQ(result.error().kind, ErrorKind::kInvalid);
    EXPECT_EQ(result.error().where, "app/fleet.yaml");
    EXPECT_NE(result.error().message.find(expected), std::string::npos) << result.error().message;
    EXPECT_EQ(result.error().message.find("s3cret-chart-pw"), std::string::npos) << "the password leaks";
  };
  expectFailure(HelmRepoAccess{.secret_name = "wrong-password", .workspace = "fleet-default"}, "401");
  expectFailure(HelmRepoAccess{.secret_name = "no-ca", .workspace = "fleet-default"}, "certificate");
  // The URL regex does not match: no credentials are sent (Fleet's helmRepoURLRegex).
  expectFailure(HelmRepoAccess{.secret_name = "helm-creds",
                               .repo_url_regex = "^https://charts\\.example\\.com",
                               .workspace = "fleet-default"},
                "certificate");
  expectFailure(HelmRepoAccess{.secret_name = "absent", .workspace = "fleet-default"}, "helmSecretName \"absent\"");
  // Another workspace's GitRepo cannot use fleet-default's secret: the same "not found" as a missing one.
  expectFailure(HelmRepoAccess{.secret_name = "helm-creds", .workspace = "team-b"},
                "helmSecretName \"helm-creds\": secret \"helm-creds\" not found in workspace \"team-b\"");
  // insecureSkipTLSVerify (from the GitRepo) accepts the unknown CA; the password still comes from the secret.
  auto insecure = request(checkout, "app", remoteChart(repo.url(), "secure"));
  insecure.helm_access =
      HelmRepoAccess{.secret_name = "no-ca", .insecure_skip_tls_verify = true, .workspace = "fleet-default"};
  auto accepted = renderer.render(insecure);
  ASSERT_TRUE(accepted.ok()) << accepted.error().describe();
  // The chart's archive URL with the same credentials: helm pull gets them from its config files, not argv.
  model::BundleDeploymentOptions by_url;
  by_url.helm = model::HelmOptions{};
  by_url.helm->chart = repo.url() + "/secure-0.3.0.tgz";
  auto url_request = request(checkout, "app", by_url);
  url_request.helm_access = HelmRepoAccess{.secret_name = "helm-creds", .workspace = "fleet-default"};
  auto pulled = renderer.render(url_request);
  ASSERT_TRUE(pulled.ok()) << pulled.error().describe() << "\n" << repo.log();
  EXPECT_EQ((*pulled)[0].object.at({"data", "version"})->asString(), "0.3.0");
  EXPECT_EQ(repo.log().find("s3cret-chart-pw"), std::string::npos);
  // While helm talked to the repository, no process showed the password in its command line or environment.
  EXPECT_EQ(repo.log().find("PASSWORD VISIBLE"), std::string::npos) << repo.log();
}

// Credentials never go to a plain http:// repository unless the GitRepo says spec.insecureAllowHTTP; the error
// names the field and the secret, never the password.
TEST(ChartSources, CredentialsOverPlainHttpNeedTheGitReposOptIn) {
  REQUIRE_TOOL(helm, "helm");
  ChartRepo repo(helm, {.user = "chartuser", .password = "plain-http-pw"});
  repo.publish("plain", "1.0.0");
  Checkout checkout;
  TempTree credentials;
  credentials.write("fleet-default/helm-creds.yaml", "username: chartuser\npassword: plain-http-pw\n");
  HelmRenderer renderer(helm, HelmRendererOptions{.credentials_dir = credentials.root()});
  auto req = request(checkout, "app", remoteChart(repo.url(), "plain"));
  req.helm_access = HelmRepoAccess{.secret_name = "helm-creds", .workspace = "fleet-default"};
  auto refused = renderer.render(req);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(refused.error().where, "app/fleet.yaml");
  EXPECT_NE(refused.error().message.find("app/fleet.yaml: helm.repo \"" + repo.url() + "\" is a plain http:// URL"),
            std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("helmSecretName \"helm-creds\""), std::string::npos);
  EXPECT_NE(refused.error().message.find("spec.insecureAllowHTTP"), std::string::npos);
  EXPECT_EQ(refused.error().message.find("plain-http-pw"), std::string::npos);
  EXPECT_EQ(repo.log().find("GET"), std::string::npos) << "nothing was sent: " << repo.log();
  req.helm_access.allow_http = true;
  auto allowed = renderer.render(req);
  ASSERT_TRUE(allowed.ok()) << allowed.error().describe() << "\n" << repo.log();
  EXPECT_EQ(repo.log().find("PASSWORD VISIBLE"), std::string::npos) << repo.log();
}

TEST(ChartSources, ChartArchiveUrl) {
  REQUIRE_TOOL(helm, "helm");
  ChartRepo repo(helm, {});
  repo.publish("direct", "4.5.6");
  Checkout checkout;
  model::BundleDeploymentOptions options;
  options.helm = model::HelmOptions{};
  options.helm->chart = repo.url() + "/direct-4.5.6.tgz";
  options.helm->release_name = "rel";
  RenderNotes notes;
  auto req = request(checkout, "app", options);
  req.notes = &notes;
  auto objects = HelmRenderer(helm).render(req);
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  EXPECT_EQ((*objects)[0].object.at({"data", "release"})->asString(), "rel");
  EXPECT_EQ(notes.chart, options.helm->chart);
  EXPECT_EQ(notes.chart_version, "4.5.6");
  EXPECT_EQ(notes.chart_digest.size(), 64u);
}

TEST(ChartSources, LocalChartDependenciesAreBuiltFromTheirRepositoryOnACopy) {
  REQUIRE_TOOL(helm, "helm");
  ChartRepo repo(helm, {});
  repo.publish("dep", "0.1.0");
  repo.publish("dep", "0.2.0");
  Checkout checkout;
  addChartDependingOnDep(checkout, repo.url());
  model::BundleDeploymentOptions options;
  options.helm = model::HelmOptions{};
  auto objects = HelmRenderer(helm).render(request(checkout, "app", options));
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  ASSERT_EQ(objects->size(), 2u);
  ASSERT_NE(byName(*objects, "dep-cm"), nullptr);
  EXPECT_EQ(byName(*objects, "dep-cm")->at({"data", "version"})->asString(), "0.1.0");
  EXPECT_FALSE(fs::exists(checkout.src() + "/app/charts")) << "the checkout is shared: it must not change";

  options.helm->disable_dependency_update = true;
  auto disabled = HelmRenderer(helm).render(request(checkout, "app", options));
  ASSERT_FALSE(disabled.ok());
  EXPECT_NE(disabled.error().message.find("dep"), std::string::npos) << disabled.error().message;
}

// The render cache's view of a remote chart (HelmRenderer::resolveRemoteInputs): what identifies it changes when
// what would render changes (a newer matching version, the same version published again), and a repository chart
// resolves from the index alone.
TEST(ChartSources, ARepositoryChartResolvesToItsVersionAndIndexDigestWithoutADownload) {
  REQUIRE_TOOL(helm, "helm");
  ChartRepo repo(helm, {});
  repo.publish("demo", "1.0.0");
  Checkout checkout;
  HelmRenderer renderer(helm);
  const auto req = request(checkout, "app", remoteChart(repo.url(), "demo", "^1.0.0"));
  auto first = renderer.resolveRemoteInputs(req);
  ASSERT_TRUE(first.ok()) << first.error().describe();
  EXPECT_NE(first->find("1.0.0"), std::string::npos) << *first;
  EXPECT_EQ(repo.log().find(".tgz"), std::string::npos) << "only the index is read: " << repo.log();
  auto again = renderer.resolveRemoteInputs(req);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);

  repo.publish("demo", "1.0.0", "description: published again\n");  // same version, other content
  auto republished = renderer.resolveRemoteInputs(req);
  ASSERT_TRUE(republished.ok());
  EXPECT_NE(*republished, *first);
  repo.publish("demo", "1.1.0");
  auto newer = renderer.resolveRemoteInputs(req);
  ASSERT_TRUE(newer.ok());
  EXPECT_NE(newer->find("1.1.0"), std::string::npos) << *newer;
  repo.publish("demo", "2.0.0");  // outside the constraint
  auto unchanged = renderer.resolveRemoteInputs(req);
  ASSERT_TRUE(unchanged.ok());
  EXPECT_EQ(*unchanged, *newer);

  // An index naming no digest cannot identify the archive: not resolvable (the render itself still works).
  repo.stripDigests();
  auto undigested = renderer.resolveRemoteInputs(req);
  ASSERT_FALSE(undigested.ok());
  EXPECT_NE(undigested.error().message.find("names no digest"), std::string::npos) << undigested.error().message;
  EXPECT_TRUE(renderer.render(req).ok());
  // A chart the repository lacks is the render's error to report; resolving fails the same way.
  EXPECT_FALSE(renderer.resolveRemoteInputs(request(checkout, "app", remoteChart(repo.url(), "absent"))).ok());
}

TEST(ChartSources, AChartUrlAndRepositoryDependenciesResolveToDigests) {
  REQUIRE_TOOL(helm, "helm");
  ChartRepo repo(helm, {});
  repo.publish("direct", "4.5.6");
  repo.publish("dep", "0.1.0");
  Checkout checkout;
  HelmRenderer renderer(helm);
  model::BundleDeploymentOptions url_options;
  url_options.helm = model::HelmOptions{};
  url_options.helm->chart = repo.url() + "/direct-4.5.6.tgz";
  auto url = renderer.resolveRemoteInputs(request(checkout, "url", url_options));
  ASSERT_TRUE(url.ok()) << url.error().describe();
  repo.publish("direct", "4.5.6", "description: changed\n");
  auto url_changed = renderer.resolveRemoteInputs(request(checkout, "url", url_options));
  ASSERT_TRUE(url_changed.ok());
  EXPECT_NE(*url_changed, *url) << "the archive's digest is part of it";

  addChartDependingOnDep(checkout, repo.url());
  model::BundleDeploymentOptions local;
  local.helm = model::HelmOptions{};
  auto deps = renderer.resolveRemoteInputs(request(checkout, "app", local));
  ASSERT_TRUE(deps.ok()) << deps.error().describe();
  EXPECT_NE(deps->find("0.1.0"), std::string::npos) << *deps;
  repo.publish("dep", "0.1.1");
  auto newer = renderer.resolveRemoteInputs(request(checkout, "app", local));
  ASSERT_TRUE(newer.ok());
  EXPECT_NE(newer->find("0.1.1"), std::string::npos) << *newer;

  // Vendored in charts/: nothing is fetched, nothing to resolve. An oci:// dependency cannot be resolved here.
  checkout.add("app/charts/dep/Chart.yaml", "apiVersion: v2\nname: dep\nversion: 0.1.0\n");
  auto vendored = renderer.resolveRemoteInputs(request(checkout, "app", local));
  ASSERT_TRUE(vendored.ok());
  EXPECT_EQ(*vendored, "");
  checkout.add("oci/Chart.yaml",
               "apiVersion: v2\nname: oci\nversion: 1.0.0\ndependencies:\n"
               "  - name: x\n    version: 1.0.0\n    repository: oci://127.0.0.1:9/charts\n");
  auto oci = renderer.resolveRemoteInputs(request(checkout, "oci", local));
  ASSERT_FALSE(oci.ok());
  EXPECT_EQ(oci.error().where, "oci/Chart.yaml");
  // A raw bundle fetches nothing.
  EXPECT_EQ(RawRenderer().resolveRemoteInputs(request(checkout, "url", {})).valueOr("x"), "");
}

TEST(ChartSources, HelmOutputIsPostRenderedByTheBundlesKustomization) {
  REQUIRE_TOOL(helm, "helm");
  REQUIRE_TOOL(kustomize, "kustomize");
  Checkout checkout;
  checkout.add("app/Chart.yaml", "apiVersion: v2\nname: app\nversion: 1.0.0\n");
  checkout.add("app/templates/cm.yaml", configMap("from-chart"));
  const std::string kustomization = "resources: [extra.yaml]\ncommonLabels: {post: rendered}\n";
  checkout.add("app/overlay/kustomization.yaml", kustomization);
  checkout.add("app/overlay/extra.yaml", configMap("extra"));
  model::BundleDeploymentOptions options;
  options.helm = model::HelmOptions{};
  options.kustomize = model::KustomizeOptions{"overlay"};
  HelmRenderer renderer(helm, HelmRendererOptions{.kustomize_binary = kustomize});
  auto objects = renderer.render(request(checkout, "app", options));
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  ASSERT_EQ(objects->size(), 2u);
  for (const char* name : {"from-chart", "extra"}) {
    ASSERT_NE(byName(*objects, name), nullptr) << name;
    EXPECT_EQ(byName(*objects, name)->at({"metadata", "labels", "post"})->asString(), "rendered");
  }
  EXPECT_EQ((*objects)[0].file, "app/overlay/kustomization.yaml");
  // The shared checkout is left as it was.
  EXPECT_EQ(readFile(checkout.src() + "/app/overlay/kustomization.yaml").value(), kustomization);
  EXPECT_FALSE(fs::exists(checkout.src() + "/app/overlay/fleet-manifests.yaml"));

  // Without kustomize configured, the chart renders alone.
  auto plain = HelmRenderer(helm).render(request(checkout, "app", options));
  ASSERT_TRUE(plain.ok());
  ASSERT_EQ(plain->size(), 1u);
  EXPECT_EQ((*plain)[0].object.at({"metadata", "labels"}), nullptr);

  checkout.add("app/overlay/kustomization.yaml", "resources: [missing.yaml]\n");
  auto broken = renderer.render(request(checkout, "app", options));
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().where, "app/overlay/kustomization.yaml");
  EXPECT_NE(broken.error().message.find("post-rendering"), std::string::npos) << broken.error().message;
}

TEST(RenderSafety, NothingOutsideTheCheckoutIsRead) {
  REQUIRE_TOOL(helm, "helm");
  REQUIRE_TOOL(kustomize, "kustomize");
  TempTree outside{{"secret.yaml", configMap("stolen")},
                   {"values.yaml", "greeting: stolen\n"},
                   {"kustomization.yaml", "resources: [secret.yaml]\n"}};
  Checkout checkout;
  checkout.add("app/Chart.yaml", "apiVersion: v2\nname: app\nversion: 1.0.0\n");
  checkout.add("app/templates/cm.yaml", configMap("ok"));
  model::BundleDeploymentOptions helm_options;
  helm_options.helm = model::HelmOptions{};
  HelmRenderer renderer(helm);

  // A template that is a symlink out of the checkout.
  checkout.symlink("src/app/templates/leak.yaml", outside.root() + "/secret.yaml");
  auto linked_template = renderer.render(request(checkout, "app", helm_options));
  ASSERT_FALSE(linked_template.ok());
  EXPECT_EQ(linked_template.error().where, "app/templates/leak.yaml");
  EXPECT_NE(linked_template.error().message.find("outside the repository checkout"), std::string::npos);
  fs::remove(checkout.src() + "/app/templates/leak.yaml");

  // An absolute valuesFile and one climbing out of the checkout.
  for (const std::string& file : std::vector<std::string>{outside.root() + "/values.yaml", "../../values.yaml"}) {
    auto options = helm_options;
    options.helm->values_files = {file};
    auto result = renderer.render(request(checkout, "app", options));
    ASSERT_FALSE(result.ok()) << file;
    EXPECT_EQ(result.error().kind, ErrorKind::kInvalid);
    EXPECT_NE(result.error().message.find("helm.valuesFiles"), std::string::npos) << result.error().message;
  }
  // A values file that is a symlink out of the checkout: in the chart directory it is refused with the chart, in
  // a directory of its own by the valuesFiles check.
  checkout.symlink("src/app/linked-values.yaml", outside.root() + "/values.yaml");
  auto options = helm_options;
  options.helm->values_files = {"linked-values.yaml"};
  auto linked_values = renderer.render(request(checkout, "app", options));
  ASSERT_FALSE(linked_values.ok());
  EXPECT_EQ(linked_values.error().where, "app/linked-values.yaml");
  fs::remove(checkout.src() + "/app/linked-values.yaml");
  checkout.add("chart-bundle/chart/Chart.yaml", "apiVersion: v2\nname: c\nversion: 1.0.0\n");
  checkout.symlink("src/chart-bundle/values/linked.yaml", outside.root() + "/values.yaml");
  options.helm->chart = "chart";
  options.helm->values_files = {"values/linked.yaml"};
  auto linked_elsewhere = renderer.render(request(checkout, "chart-bundle", options));
  ASSERT_FALSE(linked_elsewhere.ok());
  EXPECT_EQ(linked_elsewhere.error().kind, ErrorKind::kInvalid);
  EXPECT_NE(linked_elsewhere.error().message.find("helm.valuesFiles"), std::string::npos)
      << linked_elsewhere.error().message;

  // A kustomization whose resource climbs out of the checkout, and one with a symlinked resource.
  const std::string climb = fs::relative(outside.root(), checkout.src() + "/k").string();
  checkout.add("k/kustomization.yaml", "resources: [" + climb + "]\n");
  auto climbed = KustomizeRenderer(kustomize).render(request(checkout, "k", {}));
  ASSERT_FALSE(climbed.ok());
  EXPECT_EQ(climbed.error().kind, ErrorKind::kInvalid);
  EXPECT_EQ(climbed.error().where, "k/kustomization.yaml");
  checkout.add("k2/kustomization.yaml", "resources: [leak.yaml]\n");
  checkout.symlink("src/k2/leak.yaml", outside.root() + "/secret.yaml");
  auto linked = KustomizeRenderer(kustomize).render(request(checkout, "k2", {}));
  ASSERT_FALSE(linked.ok());
  EXPECT_EQ(linked.error().where, "k2/leak.yaml");
}

// renderBundle with a remote chart: the resolved version is noted for the render status, and the Helm options
// that matter at apply time travel to the agent in the event's options.
TEST(ChartSources, RenderBundleNotesTheChartVersionAndPassesApplyTimeOptions) {
  REQUIRE_TOOL(helm, "helm");
  ChartRepo repo(helm, {});
  repo.publish("demo", "1.4.2");
  Checkout checkout;
  checkout.add("app/fleet.yaml", "defaultNamespace: web\nhelm:\n  repo: " + repo.url() +
                                     "\n  chart: demo\n  version: \">=1.0.0 <2.0.0\"\n  releaseName: web\n"
                                     "  takeOwnership: true\n  atomic: true\n  force: true\n  timeoutSeconds: 120\n"
                                     "  waitForJobs: true\n");  // maxHistory is refused by name (option_support.h)
  testing::BundleRenderInputs inputs("repo", helm);
  auto rendered = inputs.renderIn(checkout.src(), BundleDir{"app", "app/fleet.yaml"});
  ASSERT_TRUE(rendered.ok()) << rendered.error().describe();
  ASSERT_FALSE(rendered->error) << rendered->error->message;
  EXPECT_EQ(rendered->renderer, "helm");
  EXPECT_EQ(rendered->notes.chart_version, "1.4.2");
  EXPECT_EQ(rendered->notes.chart, repo.url() + " demo");
  const Json* helm_options = rendered->event.options.find("helm");
  ASSERT_NE(helm_options, nullptr);
  EXPECT_TRUE(helm_options->getBool("takeOwnership"));
  EXPECT_TRUE(helm_options->getBool("atomic"));
  EXPECT_TRUE(helm_options->getBool("force"));
  EXPECT_TRUE(helm_options->getBool("waitForJobs"));
  EXPECT_EQ(helm_options->getInt("timeoutSeconds"), 120);
  const auto& manifest = rendered->manifests.at(rendered->event.manifest_id);
  EXPECT_NE(manifest.text.find("\"1.4.2\""), std::string::npos);
}

// oci:// through helm against a real OCI registry (`crane registry serve`, go-containerregistry's registry; built
// by scripts/setup) behind the TLS + basic-auth front of chart_repo_server.py: a semver constraint on the tags,
// credentials from the helmSecretName, the CA from its cacerts.
TEST(ChartSources, OciChartWithAVersionConstraint) {
  REQUIRE_TOOL(helm, "helm");
  REQUIRE_TOOL(crane, "crane");
  TempTree registry_dir;
  auto registry = Process::start({.argv = {crane, "registry", "serve", "--address", "127.0.0.1:0"},
                                  .output_file = registry_dir.root() + "/registry.log",
                                  .kill_with_parent = true});
  ASSERT_TRUE(registry.ok()) << registry.error().describe();
  std::string port;
  for (int i = 0; i < 200 && port.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::string log = readFile(registry_dir.root() + "/registry.log").valueOr("");
    if (auto at = log.find("serving on port "); at != std::string::npos) {
      port = trim(log.substr(at + 16));
    }
  }
  ASSERT_FALSE(port.empty()) << "the registry did not start";
  const std::string registry_url = "http://127.0.0.1:" + port;

  ChartRepo packager(helm, {});  // only packages the charts
  packager.publish("ocidemo", "1.1.0");
  packager.publish("ocidemo", "1.3.0");
  packager.publish("ocidemo", "2.0.0");
  for (const char* version : {"1.1.0", "1.3.0", "2.0.0"}) {
    runTool({helm, "push", packager.archive(std::string("ocidemo-") + version + ".tgz"),
             "oci://127.0.0.1:" + port + "/charts", "--plain-http"},
            registry_dir.root());
  }
  ChartRepo front(helm, {.tls = true, .user = "ociuser", .password = "oci-pw-123", .upstream = registry_url});
  TempTree credentials;
  std::string indented;
  for (const auto& line : split(front.caPem(), '\n')) {
    indented += "  " + line + "\n";
  }
  credentials.write("fleet-default/oci-creds.yaml", "username: ociuser\npassword: oci-pw-123\ncacerts: |\n" + indented);
  HelmRenderer renderer(helm, HelmRendererOptions{.credentials_dir = credentials.root()});

  Checkout checkout;
  model::BundleDeploymentOptions options;
  options.helm = model::HelmOptions{};
  options.helm->chart = "oci://127.0.0.1:" + front.url().substr(front.url().rfind(':') + 1) + "/charts/ocidemo";
  options.helm->version = "^1.0.0";
  RenderNotes notes;
  auto req = request(checkout, "app", options);
  req.helm_access = HelmRepoAccess{.secret_name = "oci-creds", .workspace = "fleet-default"};
  req.notes = &notes;
  auto objects = renderer.render(req);
  ASSERT_TRUE(objects.ok()) << objects.error().describe() << "\n" << front.log();
  EXPECT_EQ((*objects)[0].object.at({"data", "version"})->asString(), "1.3.0");
  EXPECT_EQ(notes.chart_version, "1.3.0");
  EXPECT_EQ(notes.chart, options.helm->chart);
  // helm registry login read the password on stdin; no process showed it while helm talked to the registry.
  EXPECT_EQ(front.log().find("PASSWORD VISIBLE"), std::string::npos) << front.log();
  // The render cache's view: the pulled archive's digest (the same archive, the same identity).
  auto resolved = renderer.resolveRemoteInputs(req);
  ASSERT_TRUE(resolved.ok()) << resolved.error().describe();
  EXPECT_NE(resolved->find(notes.chart_digest), std::string::npos) << *resolved;
  EXPECT_EQ(renderer.resolveRemoteInputs(req).valueOr(""), *resolved);

  req.helm_access = HelmRepoAccess{};  // no credentials: the front answers 401 (and the CA is unknown)
  auto refused = renderer.render(req);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().where, "app/fleet.yaml");
}

}  // namespace
}  // namespace flotilla::render

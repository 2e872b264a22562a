// Unit tests of charts/flotilla-hub and charts/flotilla-agent: `helm lint` is clean and `helm template` renders
// valid Kubernetes objects of the expected kinds, with the settings the values promise (probes, non-root,
// NATS wiring, credentials mounts, RBAC choice, required values).
#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "deploy_util.h"
#include "flotilla/core/util.h"

namespace flotilla::deploy_test {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

// The values the agent chart cannot render without: its cluster, the hub's URL, its creds and the CA.
std::vector<std::string> agentRequired() {
  return {"--set", "clusterName=edge-1",
          "--set", "nats.url=tls://hub:4222",
          "--set", "nats.credentials.secretName=edge-1-nats",
          "--set", "nats.tls.secretName=edge-1-nats"};
}

// The hub chart rendered without a cluster: helm template cannot look the nats.auth Secrets up.
const std::vector<std::string> kOffline{"--set", "nats.auth.lookupSecrets=false"};

Result<std::vector<Json>> renderHub(const std::vector<std::string>& args) {
  std::vector<std::string> all = kOffline;
  all.insert(all.end(), args.begin(), args.end());
  return renderChart("flotilla-hub", all);
}

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

std::string stringAt(const Json& object, std::initializer_list<std::string_view> path) {
  const Json* value = object.at(path);
  return value && value->isString() ? value->asString() : std::string();
}

// Every container of a hub or agent workload: probes on /healthz and /readyz, non-root, read-only root fs,
// no privilege escalation, resources set.
void expectHardenedWorkload(const Json& workload) {
  const std::string name = stringAt(workload, {"metadata", "name"});
  const Json* pod = workload.at({"spec", "template", "spec"});
  ASSERT_NE(pod, nullptr) << name;
  EXPECT_TRUE(pod->at({"securityContext", "runAsNonRoot"}) && pod->at({"securityContext", "runAsNonRoot"})->asBool())
      << name;
  const Json* container = firstContainer(workload);
  ASSERT_NE(container, nullptr) << name;
  EXPECT_EQ(stringAt(*container, {"livenessProbe", "httpGet", "path"}), "/healthz") << name;
  EXPECT_EQ(stringAt(*container, {"readinessProbe", "httpGet", "path"}), "/readyz") << name;
  EXPECT_EQ(container->at({"securityContext", "readOnlyRootFilesystem"})->asBool(), true) << name;
  EXPECT_EQ(container->at({"securityContext", "allowPrivilegeEscalation"})->asBool(), false) << name;
  EXPECT_NE(container->at({"resources", "requests"}), nullptr) << name;
  EXPECT_THAT(stringAt(*container, {"image"}), HasSubstr("flotilla/runtime:")) << name;
}

// `helm lint --strict` of the chart passes with no warnings or info notes under each set of values.
void expectLintClean(const std::string& chart, const std::vector<std::vector<std::string>>& value_sets) {
  const std::string helm = toolPath("helm");
  ASSERT_FALSE(helm.empty()) << "helm missing: run scripts/setup --no-run";
  for (const auto& args : value_sets) {
    auto result = run(with({helm, "lint", "--strict", chartDir(chart)}, args));
    EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
    EXPECT_THAT(result.out, HasSubstr("0 chart(s) failed"));
    EXPECT_THAT(result.out + result.err, ::testing::Not(HasSubstr("[WARNING]")));
    EXPECT_THAT(result.out + result.err, ::testing::Not(HasSubstr("[INFO]")));
  }
}

TEST(HubChart, LintIsClean) {
  expectLintClean(
      "flotilla-hub",
      {kOffline,
       with(kOffline, {"--set", "nats.embedded.enabled=false", "--set", "nats.url=tls://nats:4222"}),
       with(kOffline, {"--set", "nats.auth.mutualTls=true"}),
       with(kOffline, {"--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.serviceMonitor.enabled=true",
                       "--set", "scheduler.perClusterMetrics=true", "--set", "metrics.dashboards.enabled=true"}),
       {"--set", "nats.auth.enabled=false"}});
}

TEST(HubChart, DefaultsRenderEmbeddedNatsAndThreeServices) {
  auto objects = renderHub({});
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  // Two ClusterRoles aggregate Fleet's CRDs into view and edit/admin (rbac.aggregateToDefaultRoles); the gateway
  // (gateway.enabled, the default) has its Deployment, ServiceAccount, ClusterRole, binding and admission policy.
  EXPECT_EQ(kindCounts(*objects), (std::map<std::string, int>{{"ClusterRole", 3},
                                                              {"ClusterRoleBinding", 1},
                                                              {"ConfigMap", 1},
                                                              {"Deployment", 4},
                                                              {"NetworkPolicy", 5},
                                                              {"Service", 6},
                                                              {"ServiceAccount", 2},
                                                              {"StatefulSet", 1},
                                                              {"ValidatingAdmissionPolicy", 1},
                                                              {"ValidatingAdmissionPolicyBinding", 1}}));
  const Json* gateway = findObject(*objects, "Deployment", "t-flotilla-hub-gateway");
  ASSERT_NE(gateway, nullptr);
  expectHardenedWorkload(*gateway);
  EXPECT_EQ(stringList(firstContainer(*gateway)->find("command")), std::vector<std::string>{"flotilla-gateway"});
  // Its own ServiceAccount's token (the API server's), unlike the other services, which mount none.
  EXPECT_EQ(gateway->at({"spec", "template", "spec", "serviceAccountName"})->asString(), "t-flotilla-hub-gateway");
  EXPECT_TRUE(gateway->at({"spec", "template", "spec", "automountServiceAccountToken"})->asBool());
  EXPECT_EQ(gateway->at({"spec", "replicas"})->asInt(), 1);
  for (const std::string& component : kHubServices) {
    const Json* deployment = findObject(*objects, "Deployment", "t-flotilla-hub-" + component);
    ASSERT_NE(deployment, nullptr) << component;
    expectHardenedWorkload(*deployment);
    const Json* container = firstContainer(*deployment);
    EXPECT_EQ(stringList(container->find("command")), std::vector<std::string>{"flotilla-" + component});
    const auto args = stringList(container->find("args"));
    EXPECT_THAT(args, Contains("--nats-url=tls://t-flotilla-hub-nats.flotilla-system.svc:4222"));
    EXPECT_THAT(args, Contains("--http-addr=0.0.0.0:8080"));
    EXPECT_NE(findObject(*objects, "Service", "t-flotilla-hub-" + component), nullptr) << component;
  }
  const Json* nats = findObject(*objects, "StatefulSet", "t-flotilla-hub-nats");
  ASSERT_NE(nats, nullptr);
  EXPECT_THAT(stringList(firstContainer(*nats)->find("args")), Contains("--jetstream"));
  EXPECT_NE(nats->at({"spec", "volumeClaimTemplates"}), nullptr);
  // The poller keeps its mirrors in an emptyDir unless persistence is on; git credentials are not mounted.
  const Json* poller = findObject(*objects, "Deployment", "t-flotilla-hub-poller");
  const auto args = stringList(firstContainer(*poller)->find("args"));
  EXPECT_THAT(args, Contains("--data-dir=/var/lib/flotilla/poller"));
  EXPECT_EQ(std::count_if(args.begin(), args.end(), [](const auto& a) { return a.starts_with("--credentials-dir"); }),
            0);
  EXPECT_EQ(findObject(*objects, "PersistentVolumeClaim", "t-flotilla-hub-poller-data"), nullptr);
}

// Ingress by default: NATS' client port from any source (agents in other clusters), /metrics and NATS' monitoring
// port only from the monitoring namespaces, the poller's webhook port (when on) from any source.
TEST(HubChart, NetworkPoliciesByDefault) {
  auto objects = renderHub({"--set", "poller.webhook.enabled=true"});
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  const Json* nats = findObject(*objects, "NetworkPolicy", "t-flotilla-hub-nats");
  ASSERT_NE(nats, nullptr);
  const auto& nats_rules = nats->at({"spec", "ingress"})->asArray();
  ASSERT_EQ(nats_rules.size(), 2u);
  EXPECT_EQ(stringAt(nats_rules[0].find("ports")->asArray()[0], {"port"}), "client");
  EXPECT_EQ(nats_rules[0].find("from"), nullptr) << "agents connect from anywhere";
  EXPECT_EQ(stringAt(nats_rules[1].find("ports")->asArray()[0], {"port"}), "monitor");
  EXPECT_EQ(stringAt(nats_rules[1].find("from")->asArray()[0],
                     {"namespaceSelector", "matchLabels", "kubernetes.io/metadata.name"}),
            "monitoring");
  for (const std::string component : {"poller", "bundler", "scheduler", "gateway"}) {
    const Json* policy = findObject(*objects, "NetworkPolicy", "t-flotilla-hub-" + component);
    ASSERT_NE(policy, nullptr) << component;
    const auto& rules = policy->at({"spec", "ingress"})->asArray();
    ASSERT_EQ(rules.size(), component == "poller" ? 2u : 1u) << component;
    EXPECT_EQ(stringAt(rules[0].find("ports")->asArray()[0], {"port"}), "http");
    EXPECT_NE(rules[0].find("from"), nullptr) << component << ": metrics only from the selected namespaces";
  }
  const Json* poller = findObject(*objects, "Deployment", "t-flotilla-hub-poller");
  EXPECT_THAT(stringList(firstContainer(*poller)->find("args")), Contains("--webhook-addr=0.0.0.0:9000"));
  auto off = renderHub({"--set", "networkPolicy.enabled=false"});
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(kindCounts(*off).count("NetworkPolicy"), 0u);
}

//! The labels of `selector` (matchLabels) all hold in `labels`.
bool selects(const Json& selector, const Json* labels) {
  if (labels == nullptr) {
    return false;
  }
  for (const auto& [key, value] : selector.asObject()) {
    const Json* label = labels->find(key);
    if (label == nullptr || *label != value) {
      return false;
    }
  }
  return true;
}

//! The components the ServiceMonitor scrapes: the values of its app.kubernetes.io/component expression.
std::vector<std::string> scrapedComponents(const Json& monitor) {
  for (const auto& expression : monitor.at({"spec", "selector", "matchExpressions"})->asArray()) {
    if (expression.getString("key") == "app.kubernetes.io/component" && expression.getString("operator") == "In") {
      return stringList(expression.find("values"));
    }
  }
  return {};
}

// Every hub Deployment whose container serves port http (/metrics) is scraped: the ServiceMonitor selects a
// Service of it (the chart's name and instance labels, its component) whose selector picks the Deployment's pods
// and whose port http the endpoint names. The gateway (gateway.enabled, the default) included; without it, only
// the three services.
TEST(HubChart, ServiceMonitorScrapesEveryComponentServingMetrics) {
  for (const bool gateway : {true, false}) {
    auto objects = renderHub({"--set", "metrics.serviceMonitor.enabled=true", "--set",
                              std::string("gateway.enabled=") + (gateway ? "true" : "false")});
    ASSERT_TRUE(objects.ok()) << objects.error().describe();
    const Json* monitor = findObject(*objects, "ServiceMonitor", "t-flotilla-hub");
    ASSERT_NE(monitor, nullptr);
    const auto& endpoint = monitor->at({"spec", "endpoints"})->asArray().at(0);
    EXPECT_EQ(endpoint.getString("port"), "http");
    EXPECT_EQ(endpoint.getString("path"), "/metrics");
    const auto components = scrapedComponents(*monitor);
    std::vector<std::string> expected = {"poller", "bundler", "scheduler"};
    if (gateway) {
      expected.emplace_back("gateway");
    }
    EXPECT_EQ(components, expected);
    size_t serving = 0;
    for (const auto& deployment : *objects) {
      const Json* container = deployment.getString("kind") == "Deployment" ? firstContainer(deployment) : nullptr;
      const Json* ports = container != nullptr ? container->find("ports") : nullptr;
      if (ports == nullptr || std::none_of(ports->asArray().begin(), ports->asArray().end(),
                                           [](const Json& port) { return port.getString("name") == "http"; })) {
        continue;
      }
      ++serving;
      const std::string name = stringAt(deployment, {"metadata", "name"});
      const Json* pod_labels = deployment.at({"spec", "template", "metadata", "labels"});
      const Json* service = nullptr;
      for (const auto& object : *objects) {
        if (object.getString("kind") == "Service" && object.at({"spec", "selector"}) != nullptr &&
            selects(*object.at({"spec", "selector"}), pod_labels)) {
          service = &object;
        }
      }
      ASSERT_NE(service, nullptr) << name << " has no Service";
      EXPECT_TRUE(selects(*monitor->at({"spec", "selector", "matchLabels"}), service->at({"metadata", "labels"})))
          << name;
      EXPECT_THAT(components, Contains(stringAt(*service, {"metadata", "labels", "app.kubernetes.io/component"})))
          << name;
      const auto& service_ports = service->at({"spec", "ports"})->asArray();
      EXPECT_TRUE(std::any_of(service_ports.begin(), service_ports.end(), [](const Json& port) {
        return port.getString("name") == "http";
      })) << name;
    }
    EXPECT_EQ(serving, components.size());
  }
}

// No exposure of the embedded NATS without authentication and TLS: with nats.auth.enabled=false, LoadBalancer and
// NodePort need a server config of the user's own (configSecret); with nats.auth (the default) they render.
TEST(HubChart, ExposingUnauthenticatedNatsIsRefused) {
  for (const char* type : {"LoadBalancer", "NodePort"}) {
    auto objects =
        renderHub({"--set", "nats.auth.enabled=false", "--set", std::string("nats.embedded.service.type=") + type});
    ASSERT_FALSE(objects.ok()) << type;
    EXPECT_THAT(objects.error().message, HasSubstr(std::string("nats.embedded.service.type=") + type +
                                                   " exposes a NATS server without authentication or TLS"));
    auto secured = renderHub({"--set", std::string("nats.embedded.service.type=") + type});
    EXPECT_TRUE(secured.ok()) << type << ": " << secured.error().describe();
  }
  auto configured = renderHub({"--set", "nats.auth.enabled=false", "--set", "nats.embedded.service.type=LoadBalancer",
                               "--set", "nats.embedded.configSecret=nats-config"});
  EXPECT_TRUE(configured.ok()) << configured.error().describe();
}

// The size caps reach every service that creates the topology, garbage collection the two writers.
TEST(HubChart, StoreCapsAndGarbageCollectionReachTheServices) {
  auto objects =
      renderHub({"--set", "store.maxBytes=4GiB", "--set", "store.limits.sources=1GiB", "--set", "gc.grace=2h"});
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  expectHubServiceArgs(*objects, {"--store-max-bytes=4GiB", "--store-limits=sources=1GiB"});
  expectHubServiceArgs(*objects, {"--gc-grace=2h", "--gc-interval=10m"}, {"poller", "bundler"});
}

// scheduler.agentLabels reaches --agent-labels; by default (none allowed) the flag is left out, and a key with a
// space is refused by the schema.
TEST(HubChart, AgentLabelsReachTheScheduler) {
  auto objects = renderHub({"--set", "scheduler.agentLabels={env,example.com/*}"});
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  EXPECT_THAT(hubServiceArgs(*objects, "scheduler"), Contains("--agent-labels=env,example.com/*"));
  auto defaults = renderHub({});
  ASSERT_TRUE(defaults.ok()) << defaults.error().describe();
  for (const std::string& arg : hubServiceArgs(*defaults, "scheduler")) {
    EXPECT_FALSE(arg.starts_with("--agent-labels")) << arg;
  }
  auto bad = renderHub({"--set", "scheduler.agentLabels={not a key}"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("agentLabels"), std::string::npos) << bad.error().message;
}

TEST(HubChart, ExternalNatsReplacesTheStatefulSet) {
  auto objects = renderHub({"--set", "nats.embedded.enabled=false", "--set", "nats.url=nats://a:4222\\,nats://b:4222"});
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  EXPECT_EQ(kindCounts(*objects).count("StatefulSet"), 0u);
  EXPECT_EQ(kindCounts(*objects)["Service"], 4) << "the hub components (the gateway too), none for NATS";
  const Json* scheduler = findObject(*objects, "Deployment", "t-flotilla-hub-scheduler");
  ASSERT_NE(scheduler, nullptr);
  EXPECT_THAT(stringList(firstContainer(*scheduler)->find("args")), Contains("--nats-url=nats://a:4222,nats://b:4222"));
}

//! The image of every container of the rendered workloads, by "<kind>/<name>".
std::map<std::string, std::string> imagesOf(const std::vector<Json>& objects) {
  std::map<std::string, std::string> out;
  for (const auto& object : objects) {
    if (const Json* container = firstContainer(object); container != nullptr) {
      out[stringAt(object, {"kind"}) + "/" + stringAt(object, {"metadata", "name"})] = stringAt(*container, {"image"});
    }
  }
  return out;
}

TEST(HubChart, ImagesComeFromTheConfiguredRegistry) {
  auto bare = renderHub({});
  ASSERT_TRUE(bare.ok()) << bare.error().describe();
  EXPECT_EQ(imagesOf(*bare).at("StatefulSet/t-flotilla-hub-nats"), "flotilla/nats:2.15.3");
  EXPECT_EQ(imagesOf(*bare).at("Deployment/t-flotilla-hub-poller"), "flotilla/runtime:0.1.0");
  // image.registry: the Flotilla images; the NATS image has its own.
  auto own = renderHub({"--set", "image.registry=registry.example.com/platform/"});
  ASSERT_TRUE(own.ok()) << own.error().describe();
  for (const auto& [workload, image] : imagesOf(*own)) {
    EXPECT_EQ(image, workload.ends_with("-nats") ? "flotilla/nats:2.15.3"
                                                 : "registry.example.com/platform/flotilla/runtime:0.1.0")
        << workload;
  }
  // global.imageRegistry wins for every image.
  auto global = renderHub({"--set", "global.imageRegistry=mirror.example.com", "--set", "image.registry=other"});
  ASSERT_TRUE(global.ok()) << global.error().describe();
  const auto images = imagesOf(*global);
  EXPECT_EQ(images.size(), 5U);
  for (const auto& [workload, image] : images) {
    EXPECT_THAT(image, ::testing::StartsWith("mirror.example.com/flotilla/")) << workload;
  }
  auto wrong = renderHub({"--set", "image.registry=1"});
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.error().message, HasSubstr("/image/registry"));
}

TEST(HubChart, WebhookIngressRoutesPushesToThePoller) {
  auto none = renderHub({"--set", "poller.webhook.enabled=true"});
  ASSERT_TRUE(none.ok()) << none.error().describe();
  EXPECT_EQ(kindCounts(*none).count("Ingress"), 0U);
  auto objects =
      renderHub({"--set", "poller.webhook.enabled=true", "--set", "poller.webhook.ingress.enabled=true", "--set",
                 "poller.webhook.ingress.host=flotilla.example.com", "--set", "poller.webhook.ingress.className=nginx",
                 "--set", "poller.webhook.ingress.annotations.cert-manager\\.io/cluster-issuer=letsencrypt", "--set",
                 "poller.webhook.ingress.tls[0].secretName=webhook-tls", "--set",
                 "poller.webhook.ingress.tls[0].hosts[0]=flotilla.example.com"});
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  const Json* ingress = findObject(*objects, "Ingress", "t-flotilla-hub-webhook");
  ASSERT_NE(ingress, nullptr);
  EXPECT_EQ(stringAt(*ingress, {"spec", "ingressClassName"}), "nginx");
  EXPECT_EQ(stringAt(*ingress, {"metadata", "annotations", "cert-manager.io/cluster-issuer"}), "letsencrypt");
  EXPECT_EQ(ingress->at({"spec", "tls"})->dump(), R"([{"hosts":["flotilla.example.com"],"secretName":"webhook-tls"}])");
  const Json& rule = ingress->at({"spec", "rules"})->asArray().at(0);
  EXPECT_EQ(stringAt(rule, {"host"}), "flotilla.example.com");
  const Json& path = rule.at({"http", "paths"})->asArray().at(0);
  EXPECT_EQ(stringAt(path, {"path"}), "/webhook");
  EXPECT_EQ(stringAt(path, {"pathType"}), "Exact");
  EXPECT_EQ(stringAt(path, {"backend", "service", "name"}), "t-flotilla-hub-poller");
  EXPECT_EQ(stringAt(path, {"backend", "service", "port", "name"}), "webhook");
  // The Service the Ingress names has that port.
  const Json* service = findObject(*objects, "Service", "t-flotilla-hub-poller");
  ASSERT_NE(service, nullptr);
  EXPECT_THAT(service->at({"spec", "ports"})->dump(), HasSubstr(R"("name":"webhook")"));

  auto no_webhook = renderHub(
      {"--set", "poller.webhook.ingress.enabled=true", "--set", "poller.webhook.ingress.host=flotilla.example.com"});
  ASSERT_FALSE(no_webhook.ok());
  EXPECT_THAT(no_webhook.error().message, HasSubstr("needs poller.webhook.enabled=true"));
  auto no_host = renderHub({"--set", "poller.webhook.enabled=true", "--set", "poller.webhook.ingress.enabled=true"});
  ASSERT_FALSE(no_host.ok());
  EXPECT_THAT(no_host.error().message, HasSubstr("poller.webhook.ingress.host is required"));
  auto unknown = renderHub({"--set", "poller.webhook.ingress.path=/hooks"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.error().message, HasSubstr("path"));
}

TEST(HubChart, ExternalNatsWithoutUrlIsAnError) {
  auto objects = renderHub({"--set", "nats.embedded.enabled=false"});
  ASSERT_FALSE(objects.ok());
  EXPECT_THAT(objects.error().message, HasSubstr("nats.url is required"));
}

TEST(HubChart, CredentialsPersistenceAndServiceMonitor) {
  auto objects = renderHub({"--set", "poller.gitCredentials.secrets[0].workspace=fleet-default",
                            "--set", "poller.gitCredentials.secrets[0].name=github-token",
                            "--set", "poller.gitCredentials.secrets[1].workspace=team-b",
                            "--set", "poller.gitCredentials.secrets[1].name=gitlab-ssh",
                            "--set", "poller.gitCredentials.secrets[1].secretName=team-b-gitlab-ssh",
                            "--set", "poller.persistence.enabled=true",
                            "--set", "metrics.serviceMonitor.enabled=true",
                            "--set", "nats.embedded.enabled=false",
                            "--set", "nats.url=tls://nats:4222",
                            "--set", "nats.credentials.secretName=hub-nats",
                            "--set", "nats.tls.secretName=nats-ca"});
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  EXPECT_EQ(kindCounts(*objects)["ServiceMonitor"], 1);
  ASSERT_NE(findObject(*objects, "PersistentVolumeClaim", "t-flotilla-hub-poller-data"), nullptr);

  const Json* poller = findObject(*objects, "Deployment", "t-flotilla-hub-poller");
  ASSERT_NE(poller, nullptr);
  EXPECT_EQ(stringAt(*poller, {"spec", "strategy", "type"}), "Recreate");
  const Json* container = firstContainer(*poller);
  const auto args = stringList(container->find("args"));
  EXPECT_THAT(args, Contains("--credentials-dir=/etc/flotilla/git-credentials"));
  EXPECT_THAT(args, Contains("--nats-creds=/etc/flotilla/nats-credentials/nats.creds"));
  EXPECT_THAT(args, Contains("--nats-ca=/etc/flotilla/nats-tls/ca.crt"));
  // Each secret is a directory <workspace>/<clientSecretName>, as the poller's credentials store reads.
  std::vector<std::string> mounts;
  for (const auto& mount : container->find("volumeMounts")->asArray()) {
    mounts.push_back(mount.getString("mountPath"));
  }
  EXPECT_THAT(mounts, Contains("/etc/flotilla/git-credentials/fleet-default/github-token"));
  EXPECT_THAT(mounts, Contains("/etc/flotilla/git-credentials/team-b/gitlab-ssh"));
  std::vector<std::string> secrets;
  for (const auto& volume : poller->at({"spec", "template", "spec", "volumes"})->asArray()) {
    if (const Json* secret = volume.at({"secret", "secretName"})) {
      secrets.push_back(secret->asString());
    }
    if (const Json* claim = volume.at({"persistentVolumeClaim", "claimName"})) {
      EXPECT_EQ(claim->asString(), "t-flotilla-hub-poller-data");
    }
  }
  EXPECT_THAT(secrets, Contains("github-token"));
  EXPECT_THAT(secrets, Contains("team-b-gitlab-ssh"));
  EXPECT_THAT(secrets, Contains("hub-nats"));
}

// store.replicas reaches every hub service as --store-replicas; above 1 it needs an external NATS cluster.
TEST(HubChart, StoreReplicasNeedANatsCluster) {
  auto external = renderHub({"--set", "nats.embedded.enabled=false", "--set",
                             "nats.url=nats://a:4222\\,nats://b:4222\\,nats://c:4222", "--set", "store.replicas=3"});
  ASSERT_TRUE(external.ok()) << external.error().describe();
  for (const char* service : {"poller", "bundler", "scheduler"}) {
    EXPECT_THAT(hubServiceArgs(*external, service), Contains("--store-replicas=3")) << service;
  }
  auto embedded = renderHub({"--set", "store.replicas=3"});
  ASSERT_FALSE(embedded.ok());
  EXPECT_THAT(embedded.error().message, HasSubstr("store.replicas=3 needs a JetStream cluster"));
  EXPECT_FALSE(renderHub({"--set", "store.replicas=2"}).ok()) << "1, 3 or 5";
}

// Scheduler replicas share a lease: the chart passes its ttl (also to a single replica, for rolling updates) and
// refuses more than one replica without it.
TEST(HubChart, SchedulerReplicasShareALease) {
  auto two = renderHub({"--set", "scheduler.replicas=2"});
  ASSERT_TRUE(two.ok()) << two.error().describe();
  EXPECT_THAT(hubServiceArgs(*two, "scheduler"), Contains("--lease-ttl=10"));
  auto unleased = renderHub({"--set", "scheduler.leaseTTL=0"});
  ASSERT_TRUE(unleased.ok()) << unleased.error().describe();
  EXPECT_THAT(hubServiceArgs(*unleased, "scheduler"), Not(Contains(HasSubstr("--lease-ttl"))));
  auto refused = renderHub({"--set", "scheduler.replicas=2", "--set", "scheduler.leaseTTL=0"});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().message, HasSubstr("scheduler.replicas=2 with scheduler.leaseTTL=0"));
  EXPECT_TRUE(renderHub({"--set", "scheduler.replicas=0"}).ok());
  EXPECT_THAT(hubServiceArgs(*two, "scheduler"), Not(Contains(HasSubstr("--partitions"))));
}

// Replicas that split the work: --partitions reaches every replica, and needs the lease ttl.
TEST(HubChart, SchedulerPartitionsSplitTheWork) {
  auto split = renderHub({"--set", "scheduler.replicas=3", "--set", "scheduler.partitions=6"});
  ASSERT_TRUE(split.ok()) << split.error().describe();
  EXPECT_THAT(hubServiceArgs(*split, "scheduler"), Contains("--partitions=6"));
  EXPECT_THAT(hubServiceArgs(*split, "scheduler"), Contains("--lease-ttl=10"));
  auto refused = renderHub({"--set", "scheduler.partitions=2", "--set", "scheduler.leaseTTL=0"});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().message, HasSubstr("scheduler.partitions=2 with scheduler.leaseTTL=0"));
  EXPECT_FALSE(renderHub({"--set", "scheduler.partitions=0"}).ok()) << "the schema's minimum";
}

// Poller replicas each keep their own mirrors: more than one with a persistent volume is refused, with emptyDir fine.
TEST(HubChart, PollerReplicasWithAVolumeAreRefused) {
  auto objects = renderHub({"--set", "poller.replicas=2", "--set", "poller.persistence.enabled=true"});
  ASSERT_FALSE(objects.ok());
  EXPECT_THAT(objects.error().message, HasSubstr("poller.replicas=2 with poller.persistence.enabled"));
  EXPECT_TRUE(renderHub({"--set", "poller.replicas=2"}).ok());
  EXPECT_TRUE(renderHub({"--set", "poller.persistence.enabled=true"}).ok());
}

// The flat list of earlier versions is refused, not ignored: credentials are per workspace.
TEST(HubChart, FlatGitCredentialsListIsRefused) {
  auto objects = renderHub({"--set", "poller.gitCredentials.secretNames={github-token}"});
  ASSERT_FALSE(objects.ok());
  EXPECT_THAT(objects.error().message, HasSubstr("poller.gitCredentials.secretNames was replaced by "
                                                 "poller.gitCredentials.secrets"));
}

TEST(AgentChart, LintIsClean) {
  expectLintClean("flotilla-agent", {agentRequired(), with(agentRequired(), {"--set", "rbac.mode=rules"}),
                                     with(agentRequired(), {"--set", "rbac.mode=clusterAdmin"}),
                                     with(agentRequired(), {"--set", "impersonation.serviceAccounts={deployer}"})});
}

TEST(AgentChart, ClusterNameAndNatsUrlAreRequired) {
  auto no_name = renderChart("flotilla-agent", {"--set", "nats.url=nats://hub:4222", "--set", "nats.insecure=true"});
  ASSERT_FALSE(no_name.ok());
  EXPECT_THAT(no_name.error().message, HasSubstr("clusterName is required"));
  auto no_url = renderChart("flotilla-agent", {"--set", "clusterName=edge-1", "--set", "nats.insecure=true"});
  ASSERT_FALSE(no_url.ok());
  EXPECT_THAT(no_url.error().message, HasSubstr("nats.url is required"));
}

// The default binds the chart's generated ClusterRole (rbac.mode=applyAll), never cluster-admin; its rules are
// checked in agent_chart_rbac_test.cpp.
TEST(AgentChart, DefaultsBindTheGeneratedClusterRole) {
  auto objects = renderChart(
      "flotilla-agent", with(agentRequired(), {"--set", "clusterLabels.env=prod", "--set", "clusterLabels.region=eu",
                                               "--set", "nats.credentials.secretName=", "--set-string",
                                               "nats.credentials.content=-----BEGIN NATS-----"}));
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  EXPECT_EQ(kindCounts(*objects), (std::map<std::string, int>{{"ClusterRole", 1},
                                                              {"ClusterRoleBinding", 1},
                                                              {"Deployment", 1},
                                                              {"Secret", 1},
                                                              {"Service", 1},
                                                              {"ServiceAccount", 1}}));
  const Json* binding = findObject(*objects, "ClusterRoleBinding", "t-flotilla-agent-flotilla-system");
  ASSERT_NE(binding, nullptr);
  EXPECT_EQ(stringAt(*binding, {"roleRef", "name"}), "t-flotilla-agent-flotilla-system");
  EXPECT_NE(findObject(*objects, "ClusterRole", "t-flotilla-agent-flotilla-system"), nullptr);
  const Json* subject = &binding->find("subjects")->asArray().front();
  EXPECT_EQ(subject->getString("name"), "t-flotilla-agent");
  EXPECT_EQ(subject->getString("namespace"), "flotilla-system");

  const Json* deployment = findObject(*objects, "Deployment", "t-flotilla-agent");
  ASSERT_NE(deployment, nullptr);
  expectHardenedWorkload(*deployment);
  EXPECT_EQ(stringAt(*deployment, {"spec", "strategy", "type"}), "Recreate");
  const auto args = stringList(firstContainer(*deployment)->find("args"));
  EXPECT_THAT(args, Contains("--cluster-name=edge-1"));
  EXPECT_THAT(args, Contains("--nats-url=tls://hub:4222"));
  EXPECT_THAT(args, Contains("--labels=env=prod,region=eu"));
  EXPECT_THAT(args, Contains("--agent-namespace=flotilla-system"));
  EXPECT_THAT(args, Contains("--nats-creds=/etc/flotilla/nats-credentials/nats.creds"));
  const Json* secret = findObject(*objects, "Secret", "t-flotilla-agent-nats-credentials");
  ASSERT_NE(secret, nullptr);
  EXPECT_EQ(stringAt(*secret, {"data", "nats.creds"}), "LS0tLS1CRUdJTiBOQVRTLS0tLS0=");
}

TEST(AgentChart, RestrictedRbacGrantsRulesCrdsAndInventory) {
  auto objects =
      renderChart("flotilla-agent", with(agentRequired(), {"--set", "rbac.mode=rules", "--set", "agentNamespace=inv"}));
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  const auto counts = kindCounts(*objects);
  EXPECT_EQ(counts.at("ClusterRole"), 1);
  EXPECT_EQ(counts.at("Role"), 1);
  EXPECT_EQ(counts.at("RoleBinding"), 1);
  const Json* binding = findObject(*objects, "ClusterRoleBinding", "t-flotilla-agent-flotilla-system");
  ASSERT_NE(binding, nullptr);
  EXPECT_EQ(stringAt(*binding, {"roleRef", "name"}), "t-flotilla-agent-flotilla-system");
  const Json* role = findObject(*objects, "ClusterRole", "t-flotilla-agent-flotilla-system");
  ASSERT_NE(role, nullptr);
  EXPECT_THAT(role->find("rules")->dump(), HasSubstr("customresourcedefinitions"));
  EXPECT_THAT(role->find("rules")->dump(), HasSubstr("apiservices"));
  const Json* inventory = findObject(*objects, "Role", "t-flotilla-agent-inventory");
  ASSERT_NE(inventory, nullptr);
  EXPECT_EQ(stringAt(*inventory, {"metadata", "namespace"}), "inv");
  const Json* deployment = findObject(*objects, "Deployment", "t-flotilla-agent");
  EXPECT_THAT(stringList(firstContainer(*deployment)->find("args")), Contains("--agent-namespace=inv"));
}

// impersonate is granted only for the service accounts listed in impersonation.serviceAccounts, on those names.
TEST(AgentChart, ImpersonationOnlyForListedServiceAccounts) {
  for (const std::string mode : {"applyAll", "rules"}) {
    auto plain = renderChart("flotilla-agent", with(agentRequired(), {"--set", "rbac.mode=" + mode}));
    ASSERT_TRUE(plain.ok()) << plain.error().describe();
    for (const auto& object : *plain) {
      EXPECT_THAT(object.dump(), ::testing::Not(HasSubstr("impersonate"))) << mode << ": " << object.dump();
    }
  }
  auto listed =
      renderChart("flotilla-agent", with(agentRequired(), {"--set", "impersonation.serviceAccounts={deployer,viewer}",
                                                           "--set", "agentNamespace=inv"}));
  ASSERT_TRUE(listed.ok()) << listed.error().describe();
  const Json* role = findObject(*listed, "Role", "t-flotilla-agent-impersonate");
  ASSERT_NE(role, nullptr);
  EXPECT_EQ(stringAt(*role, {"metadata", "namespace"}), "inv");
  ASSERT_EQ(role->find("rules")->asArray().size(), 1u);
  const Json& rule = role->find("rules")->asArray().front();
  EXPECT_EQ(stringList(rule.find("resourceNames")), (std::vector<std::string>{"deployer", "viewer"}));
  EXPECT_EQ(stringList(rule.find("resources")), (std::vector<std::string>{"serviceaccounts"}));
  EXPECT_EQ(stringList(rule.find("verbs")), (std::vector<std::string>{"get", "impersonate"}));
  const Json* binding = findObject(*listed, "RoleBinding", "t-flotilla-agent-impersonate");
  ASSERT_NE(binding, nullptr);
  EXPECT_EQ(stringAt(*binding, {"roleRef", "name"}), "t-flotilla-agent-impersonate");
}

TEST(AgentChart, KubeconfigSecretManagesAnotherCluster) {
  auto objects = renderChart("flotilla-agent", with(agentRequired(), {"--set", "kubeconfig.secretName=edge-kubeconfig",
                                                                      "--set", "kubeconfig.context=edge"}));
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  const Json* deployment = findObject(*objects, "Deployment", "t-flotilla-agent");
  ASSERT_NE(deployment, nullptr);
  expectArgs(containerArgs(*deployment), {"--kubeconfig=/etc/flotilla/kubeconfig/kubeconfig", "--kube-context=edge"});
  EXPECT_FALSE(deployment->at({"spec", "template", "spec", "automountServiceAccountToken"})->asBool());
}

// parallelBundles maps to --parallel-bundles; 0 (the default) leaves the flag out, so the agent's default (4) holds.
TEST(AgentChart, ImageComesFromTheConfiguredRegistry) {
  for (const auto& [values, image] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{}, "flotilla/runtime:0.1.0"},
           {{"--set", "image.registry=registry.example.com"}, "registry.example.com/flotilla/runtime:0.1.0"},
           {{"--set", "image.registry=registry.example.com", "--set", "global.imageRegistry=mirror.example.com"},
            "mirror.example.com/flotilla/runtime:0.1.0"}}) {
    auto objects = renderChart("flotilla-agent", with(agentRequired(), values));
    ASSERT_TRUE(objects.ok()) << objects.error().describe();
    EXPECT_EQ(stringAt(*firstContainer(*findObject(*objects, "Deployment", "t-flotilla-agent")), {"image"}), image);
  }
}

// `helm show readme` shows a chart's README.md: every top-level value (and `global`, which the charts read
// imageRegistry from) has its row there, so a value added without documentation fails here.
TEST(Charts, EveryTopLevelValueIsInTheChartsReadme) {
  for (const std::string chart : {"flotilla-hub", "flotilla-agent"}) {
    auto values = readFile(chartDir(chart) + "/values.yaml");
    auto readme = readFile(chartDir(chart) + "/README.md");
    ASSERT_TRUE(values.ok() && readme.ok()) << chart;
    std::vector<std::string> keys = {"global"};
    for (const auto& line : split(*values, '\n')) {
      if (!line.empty() && std::isalpha(static_cast<unsigned char>(line[0])) && line.find(':') != std::string::npos) {
        keys.push_back(line.substr(0, line.find(':')));
      }
    }
    EXPECT_GT(keys.size(), 10U) << chart;
    for (const auto& key : keys) {
      EXPECT_THAT(*readme, HasSubstr("`" + key + "`")) << chart << "/README.md lacks the value " << key;
    }
  }
}

TEST(AgentChart, ParallelBundlesMapsToTheFlag) {
  auto objects = renderChart("flotilla-agent", with(agentRequired(), {"--set", "parallelBundles=8"}));
  ASSERT_TRUE(objects.ok()) << objects.error().describe();
  const Json* deployment = findObject(*objects, "Deployment", "t-flotilla-agent");
  ASSERT_NE(deployment, nullptr);
  EXPECT_THAT(stringList(firstContainer(*deployment)->find("args")), Contains("--parallel-bundles=8"));
  auto defaults = renderChart("flotilla-agent", agentRequired());
  ASSERT_TRUE(defaults.ok()) << defaults.error().describe();
  for (const auto& arg :
       stringList(firstContainer(*findObject(*defaults, "Deployment", "t-flotilla-agent"))->find("args"))) {
    EXPECT_THAT(arg, ::testing::Not(HasSubstr("--parallel-bundles")));
  }
}

}  // namespace
}  // namespace flotilla::deploy_test

// variants_fixture.h
//
// The per-cluster variants fixture shared by variants_integration_test.cpp and rerender_integration_test.cpp: a
// real nats-server (harness::HubTest), the pinned helm, the bundler and the scheduler in process; clusters register
// through the real registration request, and each cluster's agent durable is read as the agent would.
#pragma once

#include <functional>
#include <thread>

#include <gtest/gtest.h>

#include "flotilla/bundler/bundler.h"
#include "flotilla/bundler/flags.h"
#include "flotilla/core/log.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/events/variants.h"
#include "flotilla/harness/hub_test.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/model/codec.h"
#include "flotilla/render/external_renderers.h"
#include "flotilla/scheduler/scheduler.h"
#include "flotilla/service/hub.h"
#include "flotilla/source/archive.h"
#include "test_util.h"

namespace flotilla::bundler {

using namespace std::chrono_literals;

inline constexpr const char* kWs = "fleet-default";
inline constexpr const char* kGitRepo = "apps";

inline bool waitFor(const std::function<bool()>& check, std::chrono::milliseconds timeout = 30s) {
  return harness::waitUntil(check, timeout);
}

inline const std::map<std::string, std::string> kFiles = {
    {"web/Chart.yaml", "apiVersion: v2\nname: web\nversion: 0.1.0\n"},
    {"web/templates/cm.yaml",
     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  env: {{ .Values.env | quote }}\n"
     "  tier: {{ .Values.tier | quote }}\n"},
    {"web/fleet.yaml",
     "helm:\n  releaseName: web\n  values:\n    env: ${ .ClusterLabels.env }\n"
     "    tier: global.fleet.clusterLabels.tier\n"},
    {"plain/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata:\n  k: v\n"},
};

// A chart that renders a Widget only where the cluster serves example.com/v1 (reported at registration).
inline const std::map<std::string, std::string> kCapabilitiesFiles = {
    {"caps/Chart.yaml", "apiVersion: v2\nname: caps\nversion: 0.1.0\n"},
    {"caps/templates/cm.yaml",
     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: caps\ndata:\n"
     "  widgets: {{ .Capabilities.APIVersions.Has \"example.com/v1\" | quote }}\n"},
    {"caps/templates/widget.yaml",
     "{{- if .Capabilities.APIVersions.Has \"example.com/v1/Widget\" }}\n"
     "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n{{- end }}\n"},
    {"caps/fleet.yaml", "helm:\n  releaseName: caps\n"},
};

class VariantsIntegrationTest : public harness::HubTest {
 protected:
  void SetUp() override {
    helm_ = render::testing::pinnedTool("helm");
    if (helm_.empty()) {
      GTEST_SKIP() << "helm is not in .tools/bin (run scripts/setup)";
    }
    ASSERT_NO_FATAL_FAILURE(startHub("variants-test"));
    ASSERT_NO_FATAL_FAILURE(makeScratchDir("variants-work", work_dir_));

    model::GitRepo repo;  // no targets: every cluster of the workspace (the implicit default group)
    repo.metadata.name = kGitRepo;
    repo.metadata.ns = kWs;
    repo.spec.repo = "https://example.com/apps.git";
    ASSERT_TRUE(hub_.gitrepos->put(events::gitRepoKey(kWs, kGitRepo), model::encode(repo).dump()).ok());

    scheduler_metrics_ = std::make_unique<Metrics>("scheduler");
    scheduler::SchedulerOptions options{.fetch_timeout = 200ms, .ack_wait = 10s, .retry_base = 100ms, .retry_max = 1s};
    options.agent_labels = scheduler::AgentLabelPolicy::all();  // they target by the labels their registrations report
    auto created = scheduler::Scheduler::create(hub_, *scheduler_metrics_, options);
    ASSERT_TRUE(created.ok()) << created.error().describe();
    scheduler_ = std::move(created).value();
    ASSERT_TRUE(scheduler_->start().ok());
    ASSERT_TRUE(waitFor([&] { return scheduler_->caughtUp(); }));
  }

  void TearDown() override {
    if (bundler_) {
      bundler_->stop();
    }
    bundler_.reset();
    if (scheduler_) {
      scheduler_->stop();
    }
    scheduler_.reset();
    stopHub();
    if (!work_dir_.empty()) {
      removeAll(work_dir_);
    }
  }

  void startBundler() {
    render::RendererBinaries binaries;
    binaries.helm = helm_;
    BundlerOptions options;
    options.handler.work_dir = work_dir_;
    options.handler.retry_base = 100ms;
    options.handler.retry_max = 500ms;
    options.ack_wait = 30s;
    HandlerBus bus = hub_;
    bundler_ = std::make_unique<Bundler>(bus, render::makeRenderers(binaries), bundler_metrics_, options);
    auto started = bundler_->start();
    ASSERT_TRUE(started.ok()) << started.error().describe();
  }

  void registerCluster(const std::string& name, events::StringMap labels, std::vector<std::string> api_versions = {}) {
    auto reply = harness::requestRegistration(hub_, name, kWs, std::move(labels), std::move(api_versions));
    ASSERT_TRUE(reply.ok()) << reply.error().describe();
    auto decoded = events::parsePayload<events::RegisterReply>(reply->data());
    ASSERT_TRUE(decoded.ok() && decoded->accepted) << reply->data();
  }

  void publishCommit(const std::string& commit, const std::map<std::string, std::string>& files = kFiles) {
    source::Archive archive;
    archive.commit = commit;
    for (const auto& [path, content] : files) {
      archive.files.push_back(source::File{path, "100644", content});
    }
    const std::string encoded = source::encode(archive);
    const std::string object = source::objectName(encoded);
    ASSERT_TRUE(hub_.sources->put(object, encoded).ok());
    events::CommitEvent event;
    event.workspace = kWs;
    event.gitrepo = kGitRepo;
    event.repo = "https://example.com/apps.git";
    event.commit = commit;
    event.source_object = object;
    event.id = events::commitMsgId(kWs, kGitRepo, commit, 0);
    event.time = log::nowRfc3339();
    ASSERT_TRUE(hub_.js->publish(events::commitSubject(kWs, kGitRepo), events::encode(event).dump(), event.id).ok());
  }

  bus::PullConsumer agent(const std::string& cluster) { return harness::agentDurable(hub_, cluster); }

  //! Registers prod-a (env prod, tier gold), starts the bundler on `commit` and waits for apps-web's first
  //! deploy on prod-a's durable, returned in `a`. Call inside ASSERT_NO_FATAL_FAILURE.
  void deployWebToProdA(const std::string& commit, bus::PullConsumer& a) {
    registerCluster("prod-a", {{"env", "prod"}, {"tier", "gold"}});
    a = agent("prod-a");
    startBundler();
    publishCommit(commit);
    auto first = deploys(a, "apps-web", 1);
    ASSERT_EQ(first.size(), 1u);
  }

  //! DeployEvents for `bundle` until `count` arrived or `timeout` passed (other bundles' events are acked and
  //! skipped).
  //! The next DeployEvent of `bundle` for `consumer`; an empty one (and a failure) when none arrives.
  events::DeployEvent deployOf(bus::PullConsumer& consumer, const std::string& bundle) {
    auto got = deploys(consumer, bundle, 1);
    EXPECT_EQ(got.size(), 1u) << bundle;
    return got.empty() ? events::DeployEvent{} : got[0];
  }

  std::vector<events::DeployEvent> deploys(bus::PullConsumer& consumer, const std::string& bundle, size_t count,
                                           std::chrono::milliseconds timeout = 30s) {
    return harness::fetchPayloads<events::DeployEvent>(
        consumer, {.count = count, .timeout = timeout, .wait = 200ms, .batch = 4},
        [&](const bus::Message& message, const Result<events::DeployEvent>& event) {
          EXPECT_TRUE(event.ok()) << message.data();
          return event.ok() && event->bundle == bundle;
        });
  }

  std::string manifestText(const std::string& manifest_id) {
    auto data = hub_.manifests->get(events::manifestObjectName(manifest_id));
    EXPECT_TRUE(data.ok()) << manifest_id;
    return data.ok() ? *data : std::string();
  }

  std::string helm_;
  std::string work_dir_;
  std::unique_ptr<Metrics> scheduler_metrics_;
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  Metrics bundler_metrics_{"bundler"};
  std::unique_ptr<Bundler> bundler_;
};

}  // namespace flotilla::bundler

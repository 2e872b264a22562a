// The bundler integration tests' fixture: a real nats-server -js (tests/harness/nats) with the hub provisioned, a
// work dir, a GitRepo in KV, and helpers to publish commits (source archives built in the test) and read the
// BundleEvents, records and render statuses the bundler writes.
#pragma once

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <signal.h>

#include "flotilla/bundler/bundler.h"
#include "flotilla/core/log.h"
#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/events/terminated.h"
#include "flotilla/harness/hub_test.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/model/codec.h"
#include "flotilla/model/identity.h"
#include "flotilla/service/hub.h"
#include "flotilla/source/archive.h"

namespace flotilla::bundler::bundler_test {

using namespace std::chrono_literals;

inline std::string configMap(const std::string& name, const std::string& value = "v") {
  return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  key: " + value + "\n";
}

inline bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout = 20s) {
  return harness::waitUntil(condition, timeout);
}

class BundlerIntegrationTest : public harness::HubTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(startHub("bundler-test"));
    ASSERT_NO_FATAL_FAILURE(makeScratchDir("bundler-work", work_dir_));
    putGitRepo();
    // A reader of every BundleEvent of the workspace.
    ASSERT_TRUE(hub_.js
                    ->ensureConsumer(service::kBundlesStream,
                                     bus::ConsumerConfig{.durable = "test-reader",
                                                         .filter_subject = "flotilla.bundle." + ws_ + ".>"})
                    .ok());
    auto reader = hub_.js->bindPull(service::kBundlesStream, "test-reader");
    ASSERT_TRUE(reader.ok());
    reader_ = std::move(reader).value();
  }

  void TearDown() override {
    if (bundler_) {
      bundler_->stop();
      bundler_.reset();
    }
    stopHub();
    // Every checkout is gone: only the (empty) work dir is left.
    if (!work_dir_.empty()) {
      EXPECT_TRUE(std::filesystem::is_empty(work_dir_)) << "checkouts left in " << work_dir_;
      removeAll(work_dir_);
    }
  }

  HandlerBus handlerBus() {
    HandlerBus bus = hub_;
    bus.clusters = nullptr;  // no per-cluster variants
    return bus;
  }

  BundlerOptions options() {
    BundlerOptions options;
    options.handler.work_dir = work_dir_;
    options.handler.retry_base = 100ms;
    options.handler.retry_max = 500ms;
    options.workers = 2;
    options.ack_wait = 3s;
    return options;
  }

  void startBundler() {
    bundler_ = std::make_unique<Bundler>(handlerBus(), renderers_, metrics_, options());
    auto started = bundler_->start();
    ASSERT_TRUE(started.ok()) << started.error().describe();
  }

  void putGitRepo(std::vector<std::string> paths = {}) { putGitRepoNamed(gitrepo_, std::move(paths)); }

  void putGitRepoNamed(const std::string& name, std::vector<std::string> paths = {}) {
    model::GitRepo repo;
    repo.metadata.name = name;
    repo.metadata.ns = ws_;
    repo.metadata.labels = {{"team", "web"}};
    repo.spec.repo = "https://example.com/repo.git";
    repo.spec.paths = std::move(paths);
    repo.spec.targets.push_back(model::GitTarget{"prod", "", model::LabelSelector{{{"env", "prod"}}, {}}, "", {}});
    ASSERT_TRUE(hub_.gitrepos->put(events::gitRepoKey(ws_, name), model::encode(repo).dump()).ok());
  }

  //! Stores the archive of `files` for `commit` and publishes its CommitEvent; returns the event.
  events::CommitEvent publishCommit(const std::string& commit, const std::map<std::string, std::string>& files,
                                    std::vector<std::string> paths = {}) {
    return publishCommitFor(gitrepo_, commit, files, std::move(paths));
  }

  //! publishCommit for GitRepo `gitrepo`.
  events::CommitEvent publishCommitFor(const std::string& gitrepo, const std::string& commit,
                                       const std::map<std::string, std::string>& files,
                                       std::vector<std::string> paths = {}) {
    source::Archive archive;
    archive.commit = commit;
    archive.paths = paths;
    for (const auto& [path, content] : files) {
      archive.files.push_back(source::File{path, "100644", content});
    }
    const std::string encoded = source::encode(archive);
    const std::string object = source::objectName(encoded);
    auto stored = hub_.sources->put(object, encoded);
    EXPECT_TRUE(stored.ok()) << stored.error().describe();
    events::CommitEvent event;
    event.workspace = ws_;
    event.gitrepo = gitrepo;
    event.repo = "https://example.com/repo.git";
    event.commit = commit;
    event.paths = std::move(paths);
    event.source_object = object;
    event.id = events::commitMsgId(ws_, gitrepo, commit, 0);
    event.time = log::nowRfc3339();
    auto ack = hub_.js->publish(events::commitSubject(ws_, gitrepo), events::encode(event).dump(), event.id);
    EXPECT_TRUE(ack.ok()) << ack.error().describe();
    return event;
  }

  //! Reads BundleEvents until `count` arrived (or the timeout).
  std::vector<events::BundleEvent> readEvents(size_t count, std::chrono::milliseconds timeout = 30s) {
    return harness::fetchPayloads<events::BundleEvent>(
        reader_, {.count = count, .timeout = timeout, .wait = 500ms},
        [](const bus::Message& message, const Result<events::BundleEvent>& event) {
          EXPECT_TRUE(event.ok()) << event.error().describe() << ": " << message.data();
          if (event.ok()) {
            EXPECT_EQ(message.header("Nats-Msg-Id").value_or(""), event->id);
          }
          return true;
        });
  }

  //! Starts the bundler, publishes threeBundles() at kCommit1 and reads their BundleEvents.
  std::vector<events::BundleEvent> renderFirstCommit();

  //! No further event arrives within `wait`.
  void expectNoMoreEvents(std::chrono::milliseconds wait = 1500ms) {
    auto batch = reader_.fetch(10, wait);
    ASSERT_TRUE(batch.ok());
    for (auto& message : *batch) {
      ADD_FAILURE() << "unexpected event: " << message.data();
    }
  }

  static const events::BundleEvent* find(const std::vector<events::BundleEvent>& events, const std::string& bundle) {
    for (const auto& e : events) {
      if (e.bundle == bundle) {
        return &e;
      }
    }
    return nullptr;
  }

  std::optional<BundleRecord> record(const std::string& bundle) {
    auto entry = hub_.bundles->get(events::bundleKey(ws_, bundle));
    if (!entry.ok()) {
      return std::nullopt;
    }
    auto decoded = decodeBundleRecord(Json::parse(entry->value).value());
    EXPECT_TRUE(decoded.ok()) << decoded.error().describe();
    return decoded.ok() ? std::optional<BundleRecord>(*decoded) : std::nullopt;
  }

  std::optional<RenderStatus> renderStatus(const std::string& bundle) {
    auto entry = hub_.status->get(renderStatusKey(ws_, bundle));
    if (!entry.ok()) {
      return std::nullopt;
    }
    auto decoded = decodeRenderStatus(Json::parse(entry->value).value());
    return decoded.ok() ? std::optional<RenderStatus>(*decoded) : std::nullopt;
  }

  uint64_t bundleMessages() {
    auto info = hub_.js->streamInfo(service::kBundlesStream, "flotilla.bundle." + ws_ + ".>");
    EXPECT_TRUE(info.ok());
    uint64_t total = 0;
    for (const auto& [subject, count] : info->subjects) {
      total += count;
    }
    return total;
  }

  std::string work_dir_;
  std::string ws_ = "fleet-default";
  std::string gitrepo_ = "repo";
  Metrics metrics_{"bundler"};
  bus::PullConsumer reader_;
  std::unique_ptr<Bundler> bundler_;
  //! Raw only unless a test sets others before startBundler().
  std::shared_ptr<const render::RendererSet> renderers_ = std::make_shared<const render::RendererSet>();
};

inline const std::string kCommit1 = "1111111111111111111111111111111111111111";
inline const std::string kCommit2 = "2222222222222222222222222222222222222222";
inline const std::string kCommit3 = "3333333333333333333333333333333333333333";

inline std::map<std::string, std::string> threeBundles() {
  return {{"apps/web/fleet.yaml", "defaultNamespace: web\nlabels: {tier: front}\n"},
          {"apps/web/cm.yaml", configMap("web-a") + "---\n" + configMap("web-b")},
          {"apps/api/fleet.yaml", "namespace: api\n"},
          {"apps/api/svc.yaml", configMap("api")},
          {"apps/db/db.json", R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"db"}})"},
          {"README.md", "not a manifest"}};
}

//! The bundle `dir`: `count` ConfigMaps cm-<i>, each holding `size` bytes of `fill`.
inline std::map<std::string, std::string> bulkyBundle(const std::string& dir, int count, size_t size, char fill) {
  std::map<std::string, std::string> files = {{dir + "/fleet.yaml", "defaultNamespace: " + dir + "\n"}};
  const std::string payload(size, fill);
  for (int i = 0; i < count; ++i) {
    files[dir + "/cm-" + std::to_string(i) + ".yaml"] = configMap("cm-" + std::to_string(i), payload);
  }
  return files;
}

inline std::vector<events::BundleEvent> BundlerIntegrationTest::renderFirstCommit() {
  startBundler();
  publishCommit(kCommit1, threeBundles(), {"apps/*"});
  return readEvents(3);
}

}  // namespace flotilla::bundler::bundler_test

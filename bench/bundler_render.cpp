// Benchmark (issue 5): rendering one commit of 100 raw-YAML bundles and 20 Helm bundles.
//   flotilla: CommitHandler::handleEvent against a real nats-server — source archive from the object store,
//             checkout, discovery, render (--render-parallelism 1 and 4), canonical manifests stored, records
//             written, 120 BundleEvents published.
//   baseline: a shell loop over the same files on disk that `cat`s the raw YAML and runs `helm template` per
//             chart, concatenating everything into one file (no validation, no storage, no events).
//   one-bundle commit: right after each full render, a second commit that changes one raw bundle's file, through
//             the same handler: the render cache (services/bundler/README.md "Render cache") renders that bundle
//             and publishes the other 119 from their records; printed beside the full render (issue 14's goal:
//             <= 10 %) with the cache hits.
// Each round changes a value in every bundle so nothing is deduplicated. Not a timed test: it prints figures
// (median of the rounds) and their ratio, and asserts nothing about them.
//
//   build/bench/bench_bundler_render [rounds=3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "bench_util.h"
#include "flotilla/bundler/commit_handler.h"
#include "flotilla/bundler/flags.h"
#include "flotilla/core/log.h"
#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "flotilla/events/subjects.h"
#include "flotilla/harness/nats_server.h"
#include "flotilla/model/codec.h"
#include "flotilla/render/external_renderers.h"
#include "flotilla/service/hub.h"
#include "flotilla/source/archive.h"

using namespace flotilla;
using namespace flotilla::bundler;
using namespace flotilla::render;
using SteadyClock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

constexpr int kRawBundles = 100;
constexpr int kHelmBundles = 20;

double seconds(SteadyClock::duration d) {
  return std::chrono::duration<double>(d).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

std::string objectsYaml(int bundle, int round) {
  std::string out;
  for (int i = 0; i < 5; ++i) {
    out += "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-" + std::to_string(bundle) + "-" +
           std::to_string(i) + "\ndata:\n  round: \"" + std::to_string(round) + "\"\n  payload: \"" +
           std::string(200, 'x') + "\"\n";
  }
  out += "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web-" + std::to_string(bundle) +
         "\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: "
         "web}}\n    spec:\n      containers:\n        - {name: web, image: \"nginx:" +
         std::to_string(round) + "\", ports: [{containerPort: 80}]}\n";
  return out;
}

//! The commit's files: raw/NNN/objects.yaml and charts/NNN/{fleet.yaml,Chart.yaml,values.yaml,templates/*}.
std::map<std::string, std::string> commitFiles(int round) {
  std::map<std::string, std::string> files;
  for (int b = 0; b < kRawBundles; ++b) {
    files["raw/" + std::to_string(1000 + b) + "/objects.yaml"] = objectsYaml(b, round);
  }
  for (int h = 0; h < kHelmBundles; ++h) {
    const std::string dir = "charts/" + std::to_string(1000 + h);
    files[dir + "/Chart.yaml"] = "apiVersion: v2\nname: chart" + std::to_string(h) + "\nversion: 1.0.0\n";
    files[dir + "/values.yaml"] = "replicas: 2\nround: \"" + std::to_string(round) + "\"\n";
    files[dir + "/templates/deploy.yaml"] =
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  replicas: {{ "
        ".Values.replicas }}\n  selector: {matchLabels: {app: {{ .Release.Name }}}}\n  template:\n    metadata: "
        "{labels: {app: {{ .Release.Name }}}}\n    spec:\n      containers:\n        - name: app\n          image: "
        "\"app:{{ .Values.round }}\"\n";
    files[dir + "/templates/cm.yaml"] =
        "{{- range $i := until 5 }}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ $.Release.Name "
        "}}-{{ $i }}\ndata:\n  round: {{ $.Values.round | quote }}\n{{- end }}\n";
    files[dir + "/templates/svc.yaml"] =
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  ports: [{port: 80}]\n";
  }
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  log::setLevel(log::Level::kWarn);
  const std::string tools = envOr("FLOTILLA_TOOLS_DIR", std::string(FLOTILLA_SOURCE_DIR) + "/.tools/bin");
  const std::string helm = findExecutable(tools + "/helm");
  if (helm.empty()) {
    std::fprintf(stderr, "helm is not in %s (run scripts/setup)\n", tools.c_str());
    return 1;
  }
  auto server = harness::NatsServer::start();
  if (!server.ok()) {
    std::fprintf(stderr, "nats-server: %s\n", server.error().describe().c_str());
    return 1;
  }
  auto hub = service::connectHub(bus::ConnectOptions{.servers = {(*server)->url()}, .name = "bench-bundler"},
                                 service::HubAccess::kProvision, nullptr, std::chrono::seconds(20));
  if (!hub.ok()) {
    std::fprintf(stderr, "hub: %s\n", hub.error().describe().c_str());
    return 1;
  }
  const std::string ws = "fleet-default";
  model::GitRepo repo;
  repo.metadata.name = "bench";
  repo.metadata.ns = ws;
  repo.spec.repo = "https://example.com/bench.git";
  (void)hub->gitrepos->put(events::gitRepoKey(ws, "bench"), model::encode(repo).dump());
  auto work = makeTempDir("bench-bundler");
  if (!work.ok()) {
    return 1;
  }
  auto renderers = makeRenderers(RendererBinaries{.helm = helm, .kustomize = ""});
  Metrics metrics("bundler");
  BundlerMetrics bundler_metrics(metrics);
  HandlerBus bus = *hub;
  bus.clusters = nullptr;  // no per-cluster variants

  std::map<int, std::vector<double>> baseline;  // by shell parallelism (1 = the serial loop)
  std::map<int, std::vector<double>> flotilla;
  std::map<int, std::vector<double>> one_bundle;  // the commit after the full render that changes one bundle
  std::map<int, std::vector<double>> one_bundle_hits;
  uint64_t sequence = 0;
  // One commit of `files` through a fresh handler (as a restarted bundler would: the records are its memory);
  // the seconds it took, or a negative value when it did not render.
  auto handleCommit = [&](const std::map<std::string, std::string>& files, int parallelism) -> double {
    source::Archive archive;
    std::string all;
    for (const auto& [path, content] : files) {
      archive.files.push_back(source::File{path, "100644", content});
      all += path + content;
    }
    archive.commit = sha256Hex(all).substr(0, 40);
    const std::string encoded = source::encode(archive);
    const std::string object = source::objectName(encoded);
    (void)hub->sources->put(object, encoded);
    events::CommitEvent event;
    event.workspace = ws;
    event.gitrepo = "bench";
    event.repo = repo.spec.repo;
    event.commit = archive.commit;
    event.paths = {"raw/*", "charts/*"};
    event.source_object = object;
    event.time = log::nowRfc3339();
    HandlerOptions options;
    options.work_dir = *work + "/handler";
    options.render_parallelism = parallelism;
    CommitHandler handler(bus, renderers, bundler_metrics, options);
    const auto start = SteadyClock::now();
    auto outcome = handler.handleEvent(event, Delivery{.stream_sequence = ++sequence});
    const double took = seconds(SteadyClock::now() - start);
    if (outcome.result != "rendered") {
      std::fprintf(stderr, "the handler did not render the commit: %s\n", outcome.result.c_str());
      return -1;
    }
    return took;
  };
  for (int round = 0; round < rounds; ++round) {
    for (int parallelism : {1, 4}) {
      const int value = round * 10 + parallelism;  // new content every run: no manifest is deduplicated
      auto files = commitFiles(value);

      // Baseline: the same files on disk, a shell loop.
      const std::string dir = *work + "/baseline-" + std::to_string(value);
      for (const auto& [path, content] : files) {
        const fs::path file = fs::path(dir) / path;
        fs::create_directories(file.parent_path());
        (void)writeFile(file.string(), content);
      }
      // Serial loop for parallelism 1; for N > 1 the same work spread over N shell workers (xargs -P N), each
      // bundle into its own file, concatenated in order at the end: the fair baseline for a parallel bundler.
      const std::string script =
          "set -e\ncd \"$1\"\nif [ \"$3\" -le 1 ]; then\n"
          "  for d in raw/*/; do cat \"$d\"*.yaml; echo ---; done > out.yaml\n"
          "  for d in charts/*/; do \"$2\" template \"r$(basename \"$d\")\" \"$d\" >> out.yaml; done\n"
          "else\n  mkdir -p out\n"
          "  ls -d raw/*/ charts/*/ | xargs -P \"$3\" -n 1 sh -c '"
          "o=out/$(printf %s \"$1\" | tr / _).yaml; case \"$1\" in raw/*) { cat \"$1\"*.yaml; echo ---; } > \"$o\";; "
          "*) \"$0\" template \"r$(basename \"$1\")\" \"$1\" > \"$o\";; esac' \"$2\"\n"
          "  cat out/*.yaml > out.yaml\nfi\n";
      auto start = SteadyClock::now();
      auto shell = runCommand({.argv = {"/bin/sh", "-c", script, "sh", dir, helm, std::to_string(parallelism)},
                               .env = {{"HOME", dir},
                                       {"HELM_CACHE_HOME", dir + "/.c"},
                                       {"HELM_CONFIG_HOME", dir + "/.g"},
                                       {"HELM_DATA_HOME", dir + "/.d"}},
                               .timeout = std::chrono::minutes(10)});
      const double baseline_s = seconds(SteadyClock::now() - start);
      if (!shell.ok() || shell->exit_code != 0) {
        std::fprintf(stderr, "baseline failed: %s\n", shell.ok() ? shell->err.c_str() : "cannot run sh");
        return 1;
      }
      baseline[parallelism].push_back(baseline_s);
      removeAll(dir);

      // Flotilla: the whole commit through the handler.
      const double flotilla_s = handleCommit(files, parallelism);
      if (flotilla_s < 0) {
        return 1;
      }
      flotilla[parallelism].push_back(flotilla_s);

      // Then a commit that changes one raw bundle's file: one render, 119 bundles from the render cache.
      files["raw/1000/objects.yaml"] = objectsYaml(0, value + 1000);
      const double hits_before = metrics.value("render_cache_total", {{"result", "hit"}});
      const double one_s = handleCommit(files, parallelism);
      if (one_s < 0) {
        return 1;
      }
      const double hits = metrics.value("render_cache_total", {{"result", "hit"}}) - hits_before;
      one_bundle[parallelism].push_back(one_s);
      one_bundle_hits[parallelism].push_back(hits);
      std::printf(
          "round %d: baseline %.2f s, flotilla (render-parallelism %d) %.2f s; one-bundle commit %.3f s (%.0f "
          "render cache hits)\n",
          round + 1, baseline_s, parallelism, flotilla_s, one_s, hits);
    }
  }
  const double serial = median(baseline[1]);
  std::printf("one commit, %d raw-YAML bundles + %d Helm bundles, median of %d rounds; %s\n", kRawBundles, kHelmBundles,
              rounds, bench::machineLoad().c_str());
  std::printf("  baseline, serial sh loop (cat + helm template, concatenated): %.2f s\n", serial);
  for (const auto& [parallelism, values] : flotilla) {
    const double f = median(values);
    const double same = median(baseline[parallelism]);
    if (parallelism > 1) {
      std::printf("  baseline, the same work over %d shell workers (xargs -P %d): %.2f s\n", parallelism, parallelism,
                  same);
    }
    std::printf(
        "  flotilla, render-parallelism %d (archive, render, canonicalise, store, publish 120 events): %.2f s"
        " -> flotilla/serial shell %.2fx, flotilla/shell at parallelism %d %.2fx\n",
        parallelism, f, f / serial, parallelism, f / same);
    const double one = median(one_bundle[parallelism]);
    std::printf(
        "  flotilla, render-parallelism %d, then a commit changing one raw bundle (1 rendered, %.0f of %d from the "
        "render cache, 120 events): %.3f s = %.1f %% of the full render\n",
        parallelism, median(one_bundle_hits[parallelism]), kRawBundles + kHelmBundles, one, 100 * one / f);
  }
  removeAll(*work);
  return 0;
}

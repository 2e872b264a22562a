// A real Helm chart repository for tests: charts packaged by the pinned helm (`helm package` + `helm repo index`),
// served by chart_repo_server.py (optionally TLS with a test CA, basic auth, or a front for an OCI registry).
// Shared by libs/render's chart tests and the bundler's render cache tests.
#pragma once

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "flotilla/core/process.h"
#include "flotilla/core/util.h"
#include "test_util.h"

namespace flotilla::render::testing {

//! Runs a tool to completion with its own HOME and helm dirs under `home`; a failure fails the test.
inline std::string runTool(const std::vector<std::string>& argv, const std::string& home) {
  auto result = runCommand({.argv = argv,
                            .env = {{"HOME", home},
                                    {"HELM_CACHE_HOME", home + "/cache"},
                                    {"HELM_CONFIG_HOME", home + "/config"},
                                    {"HELM_DATA_HOME", home + "/data"}}});
  EXPECT_TRUE(result.ok());
  if (!result.ok()) {
    return {};
  }
  EXPECT_EQ(result->exit_code, 0) << argv[0] << " " << argv[1] << ": " << result->err;
  return result->out;
}

//! A chart repository: charts are packaged into a served directory, indexed with the server's URL.
class ChartRepo {
 public:
  struct Options {
    bool tls = false;
    std::string user;
    std::string password;
    std::string upstream;  //!< forward GET/HEAD there instead of serving files (TLS + auth before a registry)
  };

  ChartRepo(std::string helm, Options options) : helm_(std::move(helm)), options_(std::move(options)) {
    std::filesystem::create_directories(dir_.root() + "/served");
    std::filesystem::create_directories(dir_.root() + "/home");
    std::vector<std::string> argv = {std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3",
                                     std::string(FLOTILLA_SOURCE_DIR) + "/libs/render/test/chart_repo_server.py",
                                     "--dir",
                                     dir_.root() + "/served",
                                     "--port-file",
                                     dir_.root() + "/port"};
    if (options_.tls) {
      makeCertificates();
      argv.insert(argv.end(), {"--cert", dir_.root() + "/server.crt", "--key", dir_.root() + "/server.key"});
    }
    if (!options_.upstream.empty()) {
      argv.insert(argv.end(), {"--upstream", options_.upstream});
    }
    auto process =
        Process::start({.argv = argv,
                        .env = {{"FLOTILLA_CHART_USER", options_.user}, {"FLOTILLA_CHART_PASSWORD", options_.password}},
                        .output_file = dir_.root() + "/server.log",
                        .kill_with_parent = true});
    EXPECT_TRUE(process.ok()) << process.error().describe();
    if (process.ok()) {
      server_ = std::move(process).value();
    }
    for (int i = 0; i < 200 && !std::filesystem::exists(dir_.root() + "/port"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    auto port = readFile(dir_.root() + "/port");
    EXPECT_TRUE(port.ok()) << "the chart repository did not start: "
                           << readFile(dir_.root() + "/server.log").valueOr("");
    url_ = std::string(options_.tls ? "https" : "http") + "://127.0.0.1:" + (port.ok() ? *port : "0");
  }

  //! Packages a chart named `name` at `version` whose template is a ConfigMap `<name>-cm` recording the version.
  void publish(const std::string& name, const std::string& version, const std::string& extra_chart_yaml = "") {
    const std::string src = dir_.root() + "/src/" + name + "-" + version;
    dir_.write("src/" + name + "-" + version + "/Chart.yaml",
               "apiVersion: v2\nname: " + name + "\nversion: " + version + "\n" + extra_chart_yaml);
    dir_.write("src/" + name + "-" + version + "/templates/cm.yaml",
               "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name +
                   "-cm\ndata:\n  version: {{ .Chart.Version | quote }}\n  release: {{ .Release.Name | quote }}\n");
    runTool({helm_, "package", src, "--destination", dir_.root() + "/served"}, dir_.root() + "/home");
    runTool({helm_, "repo", "index", dir_.root() + "/served", "--url", url_}, dir_.root() + "/home");
  }

  //! The index without its `digest:` lines, as an index from a tool that writes none.
  void stripDigests() const {
    const std::string index = dir_.root() + "/served/index.yaml";
    std::string kept;
    for (const auto& line : split(readFile(index).valueOr(""), '\n')) {
      if (line.find("digest:") == std::string::npos) {
        kept += line + "\n";
      }
    }
    dir_.write("served/index.yaml", kept);
  }

  void removeArchive(const std::string& file) const { std::filesystem::remove(dir_.root() + "/served/" + file); }
  [[nodiscard]] std::string archive(const std::string& file) const { return dir_.root() + "/served/" + file; }

  [[nodiscard]] const std::string& url() const { return url_; }
  [[nodiscard]] std::string caPem() const { return readFile(dir_.root() + "/ca.crt").valueOr(""); }
  [[nodiscard]] std::string log() const { return readFile(dir_.root() + "/server.log").valueOr(""); }

 private:
  void makeCertificates() {
    const std::string d = dir_.root();
    dir_.write("server.ext", "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n");
    for (const std::vector<std::string>& step : std::vector<std::vector<std::string>>{
             {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
              d + "/ca.key", "-out", d + "/ca.crt", "-days", "2", "-subj", "/CN=Chart Test CA"},
             {"openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
              d + "/server.key", "-out", d + "/server.csr", "-subj", "/CN=127.0.0.1"},
             {"openssl", "x509", "-req", "-in", d + "/server.csr", "-CA", d + "/ca.crt", "-CAkey", d + "/ca.key",
              "-CAcreateserial", "-out", d + "/server.crt", "-days", "2", "-sha256", "-extfile", d + "/server.ext"}}) {
      runTool(step, d + "/home");
    }
  }

  std::string helm_;
  Options options_;
  TempTree dir_;
  Process server_;
  std::string url_;
};

}  // namespace flotilla::render::testing

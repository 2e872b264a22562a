#include "deploy_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "flotilla/core/util.h"
#include "flotilla/core/yaml.h"

namespace flotilla::deploy_test {

std::string sourceDir() {
  std::string dir = envOr("FLOTILLA_SOURCE_DIR", "");
#ifdef FLOTILLA_DEPLOY_SOURCE_DIR
  if (dir.empty()) {
    dir = FLOTILLA_DEPLOY_SOURCE_DIR;
  }
#endif
  return dir;
}

std::string toolPath(const std::string& name) {
  std::string dir = envOr("FLOTILLA_TOOLS_DIR", "");
  if (dir.empty()) {
    dir = sourceDir() + "/.tools/bin";
  }
  std::string path = dir + "/" + name;
  return ::access(path.c_str(), X_OK) == 0 ? path : std::string();
}

std::string chartDir(const std::string& name) {
  return sourceDir() + "/charts/" + name;
}

CommandResult run(std::vector<std::string> argv, const std::string& input) {
  auto result = runCommand({.argv = std::move(argv), .input = input, .timeout = std::chrono::minutes(3)});
  EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.error().describe());
  return result.ok() ? *result : CommandResult{};
}

Result<std::string> renderChartText(const std::string& chart, const std::vector<std::string>& args,
                                    const std::string& release, const std::string& ns) {
  const std::string helm = toolPath("helm");
  if (helm.empty()) {
    return fail(ErrorKind::kNotFound, "helm not found in the tools dir: run scripts/setup --no-run", "renderChart");
  }
  std::vector<std::string> argv{helm, "template", release, chartDir(chart), "--namespace", ns};
  argv.insert(argv.end(), args.begin(), args.end());
  auto result = runCommand({.argv = argv, .timeout = std::chrono::minutes(2)});
  if (!result.ok()) {
    return fail(result.error());
  }
  if (result->exit_code != 0) {
    return fail(ErrorKind::kInvalid, result->err, "renderChart");
  }
  return result->out;
}

Result<std::vector<Json>> parseObjects(const std::string& text, const std::string& what) {
  auto documents = parseYamlDocuments(text, what);
  if (!documents.ok()) {
    return fail(documents.error());
  }
  std::vector<Json> objects;
  for (auto& document : *documents) {
    if (document.value.isNull()) {
      continue;  // a template that rendered to nothing but comments
    }
    if (!document.value.isObject() || document.value.getString("apiVersion").empty() ||
        document.value.getString("kind").empty() || !document.value.at({"metadata", "name"}) ||
        !document.value.at({"metadata", "name"})->isString()) {
      return fail(ErrorKind::kInvalid,
                  what + ": document at line " + std::to_string(document.line) +
                      " is not a Kubernetes object: " + document.value.dump(),
                  "parseObjects");
    }
    objects.push_back(std::move(document.value));
  }
  return objects;
}

Result<std::vector<Json>> renderChart(const std::string& chart, const std::vector<std::string>& args,
                                      const std::string& release, const std::string& ns) {
  auto text = renderChartText(chart, args, release, ns);
  if (!text.ok()) {
    return fail(text.error());
  }
  return parseObjects(*text, "helm template " + chart);
}

std::map<std::string, int> kindCounts(const std::vector<Json>& objects) {
  std::map<std::string, int> counts;
  for (const auto& object : objects) {
    ++counts[object.getString("kind")];
  }
  return counts;
}

const Json* findObject(const std::vector<Json>& objects, const std::string& kind, const std::string& name) {
  for (const auto& object : objects) {
    const Json* object_name = object.at({"metadata", "name"});
    if (object.getString("kind") == kind && object_name && object_name->asString() == name) {
      return &object;
    }
  }
  return nullptr;
}

const Json* firstContainer(const Json& workload) {
  const Json* containers = workload.at({"spec", "template", "spec", "containers"});
  if (!containers || !containers->isArray() || containers->asArray().empty()) {
    return nullptr;
  }
  return &containers->asArray().front();
}

std::vector<std::string> stringList(const Json* list) {
  std::vector<std::string> out;
  if (list && list->isArray()) {
    for (const auto& item : list->asArray()) {
      out.push_back(item.isString() ? item.asString() : item.dump());
    }
  }
  return out;
}

std::vector<std::string> containerArgs(const Json& workload) {
  const Json* container = firstContainer(workload);
  return container ? stringList(container->find("args")) : std::vector<std::string>{};
}

void expectArgs(const std::vector<std::string>& args, const std::vector<std::string>& flags, const std::string& what) {
  for (const auto& flag : flags) {
    EXPECT_THAT(args, ::testing::Contains(flag)) << what;
  }
}

std::vector<std::string> hubServiceArgs(const std::vector<Json>& objects, const std::string& service) {
  const Json* deployment = findObject(objects, "Deployment", "t-flotilla-hub-" + service);
  return deployment ? containerArgs(*deployment) : std::vector<std::string>{};
}

void expectHubServiceArgs(const std::vector<Json>& objects, const std::vector<std::string>& flags,
                          const std::vector<std::string>& services) {
  for (const auto& service : services) {
    expectArgs(hubServiceArgs(objects, service), flags, service);
  }
}

}  // namespace flotilla::deploy_test

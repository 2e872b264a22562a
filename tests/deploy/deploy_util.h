// deploy_util.h
//
// Shared by the deployment tests: finds the pinned tools (helm, kubectl), renders a chart with `helm template`
// and parses the result into Kubernetes objects with flotilla's own YAML reader, and small lookups on those
// objects. Everything runs the real tools; nothing is mocked.
#pragma once

#include <string>
#include <vector>

#include "flotilla/core/json.h"
#include "flotilla/core/process.h"
#include "flotilla/core/result.h"

namespace flotilla::deploy_test {

//! The repository root (FLOTILLA_SOURCE_DIR from the build, or the environment).
std::string sourceDir();
//! $FLOTILLA_TOOLS_DIR/<name>, else <source>/.tools/bin/<name>. Empty when not executable.
std::string toolPath(const std::string& name);
//! The chart directory charts/<name>.
std::string chartDir(const std::string& name);

//! Runs a command (no shell) and returns its result; the test fails on a start error.
CommandResult run(std::vector<std::string> argv, const std::string& input = {});

//! The objects of `helm template <release> charts/<chart> -n <namespace> <args>`: kNotFound without helm,
//! kInvalid when helm fails (message = its stderr) or the output is not YAML, or a document is not an object
//! with apiVersion, kind and metadata.name.
Result<std::vector<Json>> renderChart(const std::string& chart, const std::vector<std::string>& args,
                                      const std::string& release = "t", const std::string& ns = "flotilla-system");
//! The rendered text itself (same arguments), for feeding to kubectl.
Result<std::string> renderChartText(const std::string& chart, const std::vector<std::string>& args,
                                    const std::string& release = "t", const std::string& ns = "flotilla-system");

//! The Kubernetes objects of a multi-document YAML text (`what` names it in errors); kInvalid as renderChart.
Result<std::vector<Json>> parseObjects(const std::string& text, const std::string& what);

//! Counts by kind, e.g. {"Deployment": 3, "Service": 5}.
std::map<std::string, int> kindCounts(const std::vector<Json>& objects);
//! The object with this kind and metadata.name, or nullptr.
const Json* findObject(const std::vector<Json>& objects, const std::string& kind, const std::string& name);
//! spec.template.spec.containers[0] of a workload, or nullptr.
const Json* firstContainer(const Json& workload);
//! The container's args as strings.
std::vector<std::string> stringList(const Json* list);
//! The args of a workload's first container (empty when it has none).
std::vector<std::string> containerArgs(const Json& workload);
//! `args` has every one of `flags` (a failure names `what`).
void expectArgs(const std::vector<std::string>& args, const std::vector<std::string>& flags,
                const std::string& what = "");

//! The hub chart's services, each a Deployment "<release>-flotilla-hub-<service>".
inline const std::vector<std::string> kHubServices = {"poller", "bundler", "scheduler"};
//! The args of hub service `service`'s container in release "t" (empty when its Deployment is missing).
std::vector<std::string> hubServiceArgs(const std::vector<Json>& objects, const std::string& service);
//! Each of `services` gets every one of `flags` among its args (a failure names the service).
void expectHubServiceArgs(const std::vector<Json>& objects, const std::vector<std::string>& flags,
                          const std::vector<std::string>& services = kHubServices);

}  // namespace flotilla::deploy_test

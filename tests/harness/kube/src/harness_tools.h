// tests/harness/kube/src/harness_tools.h — shared by kube_cluster.cpp, kube_node.cpp and node_services.cpp.
#pragma once

#include <cstddef>
#include <string>

namespace flotilla::harness {

//! $FLOTILLA_TOOLS_DIR, default ${FLOTILLA_SOURCE_DIR}/.tools/bin.
std::string toolsDir();
//! The tool from the tools dir, else (when allowed) from PATH; empty when neither has it.
std::string findTool(const std::string& name, bool search_path);
//! The last `lines` lines of a server's log file (long klog lines cut), or why there is none.
std::string logFileTail(const std::string& path, size_t lines);
//! A loopback port nobody listens on now, never handed out twice in this process; 0 when none was found.
int freePort();

}  // namespace flotilla::harness

// flotilla/model/cluster_document.h
//
// A Cluster as a hub admin writes it (`flotilla apply -f cluster.yaml`, stored under clusters/spec.<name>), and
// the cluster every stage works with: the agent's registration (clusters/cluster.<name>) overlaid by that document.
//
// The document is Fleet's Cluster schema (fleet.cattle.io/v1alpha1 or flotilla.io/v1alpha1), decoded strictly
// like every resource, and then narrowed to what the hub acts on: metadata.name (a DNS-1123 label, like every
// cluster name), metadata.namespace (the workspace), metadata.labels, metadata.annotations, spec.paused and
// spec.templateValues. Every other Cluster spec field (clientID, kubeConfigSecret, agentEnvVars, ...) describes
// how Fleet deploys its agent, which Flotilla does not do: it is rejected with an error naming it ("not
// implemented"), so nothing accepted is silently ignored. Status in the document is dropped (the hub writes it).
#pragma once

#include <string_view>

#include "flotilla/core/json.h"
#include "flotilla/core/result.h"
#include "flotilla/core/yaml.h"
#include "flotilla/model/resources.h"

namespace flotilla::model {

//! Decodes a hub admin's Cluster document (see the file comment). `source` names the input in errors.
Result<Cluster> decodeClusterDocument(const Json& document, std::string_view source = {});
//! Same, with field lines from a YAML document parsed with YamlLimits::record_lines.
Result<Cluster> decodeClusterDocument(const YamlDocument& document, std::string_view source);

//! The cluster as targeting, templating and rollout see it: `registration` (what the agent reported) overlaid by
//! the admin's `document` (nullptr: none). The document's labels win per key over the agent's; annotations merge
//! the same way; spec.paused and spec.templateValues come from the document; its namespace is the cluster's
//! workspace (the hub decides where a cluster belongs, as it decides its labels). Status, name and creation time
//! stay the registration's.
Cluster effectiveCluster(const Cluster& registration, const Cluster* document);

}  // namespace flotilla::model

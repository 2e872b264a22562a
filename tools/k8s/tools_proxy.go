//go:build tools

// The Service network of the test harness's node (KubeClusterOptions::with_service_network): kube-proxy, from the
// same pinned module. A file of its own, keyed apart in scripts/setup like tools_node.go.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
)

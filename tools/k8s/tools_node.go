//go:build tools

// The node of the test harness (KubeClusterOptions::with_node): kubelet and kube-scheduler, built from the same
// pinned module as kube-apiserver. A file of its own, so that adding them did not change the cache key of the
// control-plane tools in scripts/setup.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)

// Package e2e keeps upstream's e2e suite (k8s.io/kubernetes/test/e2e and the test packages its
// e2e_test.go links) in this module's graph, so that `go test -c k8s.io/kubernetes/test/e2e` builds
// e2e.test at the pinned version with the dependencies go.sum records.
package e2e

import (
	_ "k8s.io/kubernetes/test/e2e"
	_ "k8s.io/kubernetes/test/e2e/network"
)

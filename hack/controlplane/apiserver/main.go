// Command kube-apiserver is a thin wrapper that builds the upstream Kubernetes API server
// (k8s.io/kubernetes/cmd/kube-apiserver/app) at the version pinned in go.mod, so kpng's e2e
// tests can run a real control plane on loopback without downloading release binaries.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream registers them
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}

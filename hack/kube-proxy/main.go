// Command kube-proxy is a thin wrapper that builds upstream kube-proxy (k8s.io/kubernetes/cmd/kube-proxy/app)
// at the version pinned in go.mod, the same version as hack/controlplane's kube-apiserver, so
// bench/vs-upstream can run it beside kpng without downloading release binaries.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream registers them
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as upstream
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}

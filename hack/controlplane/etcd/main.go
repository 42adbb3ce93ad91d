// Command etcd is a thin wrapper that builds the etcd server (go.etcd.io/etcd/server/v3/etcdmain)
// at the version pinned in go.mod, for kpng's e2e control plane.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}

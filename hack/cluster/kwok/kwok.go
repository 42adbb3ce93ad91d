//go:build tools

// Package kwok keeps kwok's controller (sigs.k8s.io/kwok/cmd/kwok, a main package: hence the build tag,
// the file is never compiled) in this module's graph, so that `go build sigs.k8s.io/kwok/cmd/kwok`
// (hack/cluster/build.sh) builds it at the pinned version with the dependencies go.sum records.
package kwok

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)

// Module that pins the public example repositories the tests sync, apart
// from the product's go.mod: `make examples` downloads them into the Go
// module cache, verified against go.sum. Nothing of them is copied into this
// repository; see docs/rendering.md ("Tested against a public repository").
module github.com/driftless/driftless/hack/examples

go 1.26.0

// Stefan Prodan's podinfo (Apache-2.0): plain manifests, Kustomize overlays
// and a Helm chart, the repository Flux's own examples sync.
require github.com/stefanprodan/podinfo v1.8.1-0.20250910200901-e86405a8674e

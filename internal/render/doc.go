// Package render turns the files of a git checkout into the Kubernetes
// objects a Sync wants. Generators make objects: plain YAML and JSON
// manifests (multi-document files split, Lists expanded), directories
// that hold a kustomization, built with Kustomize, and HelmChart documents,
// whose charts are rendered with the Helm SDK as helm template renders
// them (hooks become waves; see addChartObjects). Each object is held as
// JSON once read; one settling step then decodes them one at a time,
// defaults namespaces, finds objects defined twice, labels and annotates
// each object with its Sync and its origin in git, and encodes it again:
// a render's objects (Object) are JSON, never all decoded at once. A
// generator that makes many objects holds its own decoded while it runs
// (a chart's, to order its hooks; a kustomization's, which Kustomize
// builds whole), one generator at a time.
//
// It reads only through an os.Root of the checkout, so neither a path nor a
// symbolic link in the repository can make it read outside the checkout;
// Kustomize reads through a filesystem on that root which refuses paths
// outside the checkout, and remote bases and resources are refused before
// Kustomize runs, so that it fetches nothing.
//
// It refuses files larger than 8 MiB, and renders that exceed their Budgets
// of files, documents, objects and bytes, counting what YAML aliases
// expand to before expanding them.
//
// Its errors are for the people who write the repository: each names the
// file, line and document, and the object, and says what to change. Render
// reports every problem it finds, not only the first.
//
// It is not a client: it talks to no cluster and no network, and learns which kinds are
// namespaced through a ScopeResolver. It does not order, diff or apply
// objects (see internal/plan and internal/apply), and it does not validate
// them beyond what driftless itself reads; the API server does that.
//
// Kustomize runs with every plugin off: no exec, container or Go plugin
// functions and no Helm inflation. Helm charts of the repository are read
// through the checkout's root; charts from repositories and registries
// come from a ChartFetcher, and valuesFrom through a ValuesReader, both
// the caller's: render itself fetches nothing.
//
// Every file the render reads, manifests and the files a kustomization
// reads alike, goes through one reader, which decrypts files encrypted with
// SOPS with Options.Decrypt, in memory (see Decryptor).
package render

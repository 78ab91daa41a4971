#!/usr/bin/env bash
# Builds the local control plane (etcd, kube-apiserver, kubectl) from the Go
# module proxy into bin/k8s. A stamp file records the inputs (the pinned
# go.mod/go.sum files and the Go version); binaries are rebuilt only when
# those change.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$root/bin/k8s"
here="$root/hack/controlplane"
k8s_version="$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$here/kubernetes/go.mod")"
major_minor="${k8s_version#v}"; major="${major_minor%%.*}"; minor="${major_minor#*.}"; minor="${minor%%.*}"

stamp="$( { go version; cat "$here"/kubernetes/go.mod "$here"/kubernetes/go.sum "$here"/etcd/go.mod "$here"/etcd/go.sum "$0"; } | sha256sum | cut -c1-16)"
if [[ -f "$out/.stamp" && "$(cat "$out/.stamp")" == "$stamp" \
      && -x "$out/etcd" && -x "$out/kube-apiserver" && -x "$out/kubectl" ]]; then
  echo "control plane up to date in bin/k8s (kubernetes $k8s_version)"
  exit 0
fi

mkdir -p "$out"
rm -f "$out/.stamp"
echo "building kube-apiserver and kubectl $k8s_version from Go modules (about 5-10 minutes on 2 cores)..."
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version"
ldflags+=" -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor"
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
(cd "$here/kubernetes" && go build -trimpath -ldflags "$ldflags" -o "$out/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl)
echo "building etcd from Go modules..."
(cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3)
echo "$stamp" > "$out/.stamp"
"$out/kube-apiserver" --version
"$out/etcd" --version | head -1

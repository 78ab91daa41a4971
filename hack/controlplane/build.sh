#!/usr/bin/env bash
# Builds the local control plane from the Go module proxy into bin/k8s:
# etcd, kube-apiserver, kubectl, kube-controller-manager, kube-scheduler and
# kwok (simulated nodes), plus kwok's default Stage files in
# bin/k8s/kwok-stages/. A stamp file records the inputs (the pinned
# go.mod/go.sum files, the Go version and this script); everything is rebuilt
# only when those change.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$root/bin/k8s"
here="$root/hack/controlplane"
k8s_version="$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$here/kubernetes/go.mod")"
major_minor="${k8s_version#v}"; major="${major_minor%%.*}"; minor="${major_minor#*.}"; minor="${minor%%.*}"

binaries=(etcd kube-apiserver kubectl kube-controller-manager kube-scheduler kwok)
# kwok's default stages (sigs.k8s.io/kwok/kustomize/stage/...): nodes become
# Ready at once and keep a lease; pods become Running and Ready at once,
# Job pods complete, deleted pods go away.
kwok_stages=(node/fast node/heartbeat-with-lease pod/fast)

stamp="$( { go version; for m in kubernetes etcd kwok; do cat "$here/$m/go.mod" "$here/$m/go.sum"; done; cat "$0"; } | sha256sum | cut -c1-16)"
up_to_date() {
  [[ -f "$out/.stamp" && "$(cat "$out/.stamp")" == "$stamp" && -d "$out/kwok-stages" ]] || return 1
  local b
  for b in "${binaries[@]}"; do [[ -x "$out/$b" ]] || return 1; done
}
if up_to_date; then
  echo "control plane up to date in bin/k8s (kubernetes $k8s_version)"
  exit 0
fi

mkdir -p "$out"
rm -f "$out/.stamp"
echo "building kube-apiserver, kubectl, kube-controller-manager and kube-scheduler $k8s_version from Go modules (about 10 minutes on 2 cores with a cold build cache)..."
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version"
ldflags+=" -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor"
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
(cd "$here/kubernetes" && go build -trimpath -ldflags "$ldflags" -o "$out/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl \
  k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler)
echo "building etcd from Go modules..."
(cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3)
echo "building kwok from Go modules..."
(cd "$here/kwok" && go build -trimpath -ldflags "-s -w" -o "$out/kwok" sigs.k8s.io/kwok/cmd/kwok)
kwok_dir="$(cd "$here/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
rm -rf "$out/kwok-stages"
mkdir -p "$out/kwok-stages"
for s in "${kwok_stages[@]}"; do
  for f in "$kwok_dir/kustomize/stage/$s"/*.yaml; do
    [[ "$(basename "$f")" == kustomization.yaml ]] && continue
    install -m 0644 "$f" "$out/kwok-stages/$(basename "$f")"
  done
done
echo "$stamp" > "$out/.stamp"
"$out/kube-apiserver" --version
"$out/etcd" --version | sed -n 1p
"$out/kwok" --version 2>/dev/null | sed -n 1p || true

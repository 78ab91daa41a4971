#!/usr/bin/env bash
# The driftless demo: a local control plane, shown, then stopped.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

say "Starting a local Kubernetes control plane (etcd + kube-apiserver built from Go modules)"
kubeconfig="$(hack/local-cluster.sh up)"
trap 'say "Stopping the local control plane"; hack/local-cluster.sh down' EXIT
export KUBECONFIG="$kubeconfig"
kubectl() { bin/k8s/kubectl "$@"; }

say "driftless and the cluster it talks to"
bin/driftless version --kubeconfig "$KUBECONFIG"

say "The cluster answers: kubectl get namespaces"
kubectl get namespaces

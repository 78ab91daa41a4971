#!/usr/bin/env bash
# Starts, stops or inspects a local Kubernetes cluster built from Go modules:
# etcd and kube-apiserver on free loopback ports, kube-controller-manager,
# kube-scheduler, and kwok simulating one node (kwok-node-0) that runs Pods
# without containers — except one device of the local cluster only: a pod
# runner plays the kubelet for Pods of the image ghcr.io/driftless/driftless
# (any tag), running their command with .local/bin/driftless (built from
# this checkout by `up`) as a local process, as the Pod's ServiceAccount.
# So the agent `driftless install` deploys really runs. Logs per Pod in
# .local/pods/; see docs/development.md ("The pod runner").
#
#   hack/local-cluster.sh up      start it; prints the admin kubeconfig path
#   hack/local-cluster.sh down    stop exactly the processes `up` started
#   hack/local-cluster.sh status  exit 0 when up, 1 when down
#
# Data, certificates, logs and pid files live in .local/ (git-ignored).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if [[ "${1:-}" == "up" ]]; then
  hack/controlplane/build.sh >&2
fi
mkdir -p bin
# Static, as every build of the Makefile and the tests (one compile of the
# shared packages serves them all).
CGO_ENABLED=0 go build -o bin/localcluster ./hack/localcluster
exec bin/localcluster "$@"

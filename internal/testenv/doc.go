// Package testenv starts the real parts that driftless's tests and demo run
// against: a local Kubernetes control plane (etcd and kube-apiserver built
// from Go modules by hack/controlplane) and a git server speaking SSH, smart
// HTTP and file://.
//
// It is test infrastructure: the product never imports it.
package testenv

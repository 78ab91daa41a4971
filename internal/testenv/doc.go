// Package testenv starts the real parts that driftless's tests and demo run
// against: a local Kubernetes control plane (etcd and kube-apiserver built
// from Go modules by hack/controlplane) and a git server speaking SSH, smart
// HTTP and file://.
//
// The control plane can also run workloads (ControlPlane.Workloads,
// MainWithWorkloads): kube-controller-manager, kube-scheduler and kwok
// simulating one node, so that Deployments get Pods which are scheduled and
// become Running and Ready without any container running. A Pod annotated
// NeverReadyAnnotation ("driftless.dev/test-never-ready": "true") instead
// stays Running but never Ready, for tests of rollouts that fail. Test
// packages opt in; Main and MainWith start etcd and kube-apiserver only.
//
// It is test infrastructure: the product never imports it.
package testenv

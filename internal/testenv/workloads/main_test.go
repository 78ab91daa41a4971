// Package workloads tests the control plane with workloads
// (testenv.MainWithWorkloads): kube-controller-manager, kube-scheduler and a
// kwok-simulated node. It is a package of its own so that the other testenv
// tests keep the cheaper etcd and kube-apiserver only control plane.
package workloads

import (
	"testing"

	"github.com/driftless/driftless/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.MainWithWorkloads(m, &env, nil) }

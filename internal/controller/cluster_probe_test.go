package controller

import (
	"errors"
	"net"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
)

// hangingProbe is a cluster whose API server answers only when released:
// a dead cluster, as a loopback listener that never answers would be, but
// with the end of each request in the test's hands.
type hangingProbe struct {
	discovery.DiscoveryInterface
	calls   chan struct{}
	release chan error
}

func (p hangingProbe) ServerVersion() (*version.Info, error) {
	p.calls <- struct{}{}
	if err := <-p.release; err != nil {
		return nil, err
	}
	return &version.Info{}, nil
}

// While one Sync of a dead cluster probes it, the cluster's other Syncs
// get the last probe's answer at once instead of waiting behind it, each
// holding a worker; a cluster never probed yet is probed once, whatever
// the number of Syncs asking, and they all get that answer.
func TestOneProbeOfARemoteClusterAtATimeAndNoSyncWaitsBehindIt(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	p := hangingProbe{calls: make(chan struct{}, 8), release: make(chan error)}
	rc := &remoteCluster{server: "https://127.0.0.1:1", probe: p}

	// Never probed: three Syncs ask at once; one probe, one answer.
	answers := make(chan error, 3)
	for range 3 {
		go func() { answers <- rc.reachable(time.Now()) }()
	}
	<-p.calls
	p.release <- refused
	for range 3 {
		var ue *UnreachableError
		if err := <-answers; !errors.As(err, &ue) {
			t.Fatalf("a Sync of the dead cluster got %v, want an UnreachableError", err)
		}
	}
	if n := len(p.calls); n != 0 {
		t.Fatalf("%d more probes for the same three Syncs, want one in all", n)
	}

	// The answer has expired: one Sync probes again (and hangs); another
	// gets the last answer without waiting for it.
	later := time.Now().Add(2 * remoteProbeTTL)
	go func() { answers <- rc.reachable(later) }()
	<-p.calls
	quick := make(chan error, 1)
	go func() { quick <- rc.reachable(later) }()
	select {
	case err := <-quick:
		var ue *UnreachableError
		if !errors.As(err, &ue) {
			t.Errorf("during the probe another Sync got %v, want the last probe's UnreachableError", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("another Sync of the cluster waited behind the probe under way (30 s), holding its worker")
	}
	p.release <- nil
	if err := <-answers; err != nil {
		t.Errorf("the probing Sync got %v after the cluster answered, want nil", err)
	}
	if err := rc.reachable(time.Now()); err != nil {
		t.Errorf("right after the cluster answered: %v, want nil (its answer, not a new probe)", err)
	}
}

package image

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/config/crd"
	"github.com/driftless/driftless/internal/testenv"
)

var (
	env      *testenv.Env
	scheme   = testenv.Scheme()
	c        client.Client
	recorder EventRecorder
)

func TestMain(m *testing.M) { testenv.MainWith(m, &env, setup) }

func setup(e *testenv.Env) error {
	ctrl.SetLogger(logr.Discard())
	var err error
	c, err = client.New(e.Config, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	defs, err := crd.All()
	if err != nil {
		return err
	}
	if err := e.InstallCRDs(context.Background(), defs...); err != nil {
		return err
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: e.Clientset.EventsV1()})
	if err := b.StartRecordingToSinkWithContext(context.Background()); err != nil {
		return err
	}
	recorder = b.NewRecorder(scheme, "driftless")
	return nil
}

// eventFor waits for an Event regarding kind namespace/name whose note
// contains want, and returns the notes seen.
func eventFor(t *testing.T, kind, namespace, name, want string) {
	t.Helper()
	var notes []string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var list eventsv1.EventList
		if err := c.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
		notes = notes[:0]
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Regarding.Kind == kind {
				notes = append(notes, e.Note)
				if strings.Contains(e.Note, want) {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("no event on %s %s/%s contains %q; events: %q", kind, namespace, name, want, notes)
}

package cli

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

// closableWatches is a client whose watches the test feeds and ends, as
// the API server ends a watch after 30 to 60 minutes.
type closableWatches struct {
	client.WithWatch
	watches chan *watch.FakeWatcher
}

func (c *closableWatches) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	w := watch.NewFake()
	c.watches <- w
	return w, nil
}

func testEvent(name, note string) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name)},
		Regarding:  corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Sync", Namespace: "shop", Name: "web"},
		Reason:     "Synced", Note: note, Type: "Normal", EventTime: metav1.NowMicro(),
	}
}

func TestEventsWatchListsAgainWhenTheAPIServerEndsTheWatch(t *testing.T) {
	scheme := testenv.Scheme()
	shown := testEvent("shown", "listed before the watch")
	c := &closableWatches{
		WithWatch: fake.NewClientBuilder().WithScheme(scheme).WithObjects(shown).Build(),
		watches:   make(chan *watch.FakeWatcher),
	}
	var listed eventsv1.EventList
	if err := c.List(context.Background(), &listed); err != nil {
		t.Fatal(err)
	}
	seen := map[types.UID]string{}
	for _, e := range listed.Items {
		seen[e.UID] = e.ResourceVersion
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rows := make(chan string)
	sel := eventSelection{namespaces: []string{"shop"}, keep: func(string, eventsv1.Event) bool { return true }}
	done := make(chan error, 1)
	go func() {
		done <- watchEvents(ctx, c, sel, []string{listed.ResourceVersion}, seen, "https://test", func(r eventRow) error {
			select {
			case rows <- r.Note:
			case <-ctx.Done():
			}
			return nil
		})
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case note := <-rows:
			return note
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: nothing shown within 30s", what)
		}
		return ""
	}
	nextWatch := func(what string) *watch.FakeWatcher {
		t.Helper()
		select {
		case w := <-c.watches:
			return w
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no watch started within 30s", what)
		}
		return nil
	}

	first := nextWatch("the first watch")
	first.Add(testEvent("watched", "came through the watch"))
	if got := next("an Event of the watch"); got != "came through the watch" {
		t.Errorf("shown %q, want the watched Event", got)
	}
	missed := testEvent("missed", "created while no watch ran")
	if err := c.Create(ctx, missed); err != nil {
		t.Fatal(err)
	}
	first.Stop() // the API server ends the watch
	if got := next("the Event created while no watch ran"); got != "created while no watch ran" {
		t.Errorf("after the watch ended, shown %q, want the Event it missed (and not again the one listed before)", got)
	}
	second := nextWatch("a new watch after the first ended")
	second.Add(testEvent("later", "came through the new watch"))
	if got := next("an Event of the new watch"); got != "came through the new watch" {
		t.Errorf("shown %q, want the Event of the new watch", got)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("watchEvents returned %v when stopped, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("watchEvents still runs 30s after it was stopped")
	}
}

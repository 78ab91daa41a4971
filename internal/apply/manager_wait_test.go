package apply_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/plan"
	"github.com/driftless/driftless/internal/render"
)

// The control plane runs no controllers: the tests play the Deployment
// controller by writing the Deployment's status.

const apiDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: $NS, annotations: {driftless.dev/wave: "0"}}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers: [{name: api, image: "api:1.0"}]
`

func configMapInWave(t *testing.T, ns, name string, wave int) render.Object {
	return fromGit(t, ns, "config/"+name+".yaml", fmt.Sprintf(`
apiVersion: v1
kind: ConfigMap
metadata: {name: %s, namespace: $NS, annotations: {driftless.dev/wave: "%d"}}
`, name, wave))
}

// setDeploymentStatus writes the status the Deployment controller would:
// rolled out, or past its progress deadline.
func setDeploymentStatus(t *testing.T, ns, name string, rolledOut bool) {
	t.Helper()
	if err := writeDeploymentStatus(ns, name, rolledOut); err != nil {
		t.Fatal(err)
	}
}

func writeDeploymentStatus(ns, name string, rolledOut bool) error {
	var d appsv1.Deployment
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
		return err
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation}
	if rolledOut {
		d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = 1, 1, 1, 1
		d.Status.Conditions = []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		}
	} else {
		d.Status.Conditions = []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded",
				Message: `ReplicaSet "api-5d9c" has timed out progressing.`},
		}
	}
	if err := c.Status().Update(context.Background(), &d); err != nil {
		return fmt.Errorf("write Deployment status: %w", err)
	}
	return nil
}

// progressLog records Options.Wait.Progress calls as "wave 0: 1/2 healthy".
type progressLog []string

func (l *progressLog) record(p apply.WaveProgress) {
	*l = append(*l, fmt.Sprintf("wave %d: %d/%d healthy", p.Wave.Index, p.Healthy, len(p.Wave.Steps)))
}

// afterGet calls hook with each object it has read.
type afterGet struct {
	client.Client
	hook func(client.Object)
}

func (a *afterGet) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := a.Client.Get(ctx, key, obj, opts...)
	if err == nil {
		a.hook(obj)
	}
	return err
}

func TestAWaveIsWrittenOnlyAfterThePreviousOneIsHealthy(t *testing.T) {
	ns := env.Namespace(t)
	var log progressLog
	var (
		mu              sync.Mutex
		waiting         bool
		rollOutErr      error
		unhealthyPolls  int
		writtenTooEarly bool
	)
	// The Deployment rolls out once a health check has seen it not rolled
	// out yet.
	spy := &afterGet{Client: c, hook: func(obj client.Object) {
		mu.Lock()
		defer mu.Unlock()
		if !waiting || obj.GetName() != "api" || unhealthyPolls > 0 {
			return
		}
		unhealthyPolls++
		var after corev1.ConfigMap
		writtenTooEarly = !apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "after"}, &after))
		rollOutErr = writeDeploymentStatus(ns, "api", true)
	}}
	m := newManagerWith(spy, ns, func(o *apply.Options) {
		o.Wait.Progress = func(p apply.WaveProgress) {
			log.record(p)
			mu.Lock()
			waiting = true
			mu.Unlock()
		}
	})
	p := planOf(fromGit(t, ns, "apps/api.yaml", apiDeployment), configMapInWave(t, ns, "after", 1))

	cs := applyOK(t, m, p)

	if rollOutErr != nil {
		t.Fatal(rollOutErr)
	}
	if unhealthyPolls == 0 {
		t.Fatal("Apply never checked the health of wave 0")
	}
	if writtenTooEarly {
		t.Error("wave 1 was written before wave 0 was healthy")
	}
	expectActions(t, cs, "Deployment/"+ns+"/api Created", "ConfigMap/"+ns+"/after Created")
	// The last wave is not waited for unless Wait.Last is set.
	if len(log) < 2 || log[0] != "wave 0: 0/1 healthy" || log[len(log)-1] != "wave 0: 1/1 healthy" {
		t.Errorf("progress = %q, want it to go from wave 0: 0/1 to 1/1 healthy, and no more", log)
	}
}

func TestAnUnhealthyWaveStopsTheApply(t *testing.T) {
	tests := []struct {
		name string
		// fail, when set, makes the Deployment fail while Apply waits.
		fail    bool
		timeout time.Duration
		around  func(ctx context.Context, w apply.Wave, wait func(context.Context) error) error
		// readsFailAfter, when set, makes every read of the Deployment
		// after this many fail, as the client's rate limiter refuses a
		// request it cannot send before the deadline.
		readsFailAfter int
		wantIs         error
		wantMsg        []string
	}{
		{
			name:    "a Deployment past its progress deadline fails the wave at once",
			fail:    true,
			wantMsg: []string{"an object failed", "Deployment/$NS/api is Failed", "Progress deadline exceeded", "(apps/api.yaml#0)"},
		},
		{
			name:    "a Deployment not rolled out within Wait.Timeout times the wave out",
			timeout: 1500 * time.Millisecond,
			wantIs:  apply.ErrHealthTimeout,
			wantMsg: []string{"health check timed out after 1.5s", "Deployment/$NS/api is InProgress"},
		},
		{
			name:           "a read that fails as time runs out does not hide what the last read saw",
			timeout:        1500 * time.Millisecond,
			readsFailAfter: 1,
			wantIs:         apply.ErrHealthTimeout,
			wantMsg:        []string{"health check timed out after 1.5s", "Deployment/$NS/api is InProgress"},
		},
		{
			name: "a wait that Wait.Around ends early stops the apply",
			around: func(ctx context.Context, w apply.Wave, wait func(context.Context) error) error {
				ctx, cancel := context.WithCancel(ctx)
				cancel()
				return wait(ctx)
			},
			wantIs:  context.Canceled,
			wantMsg: []string{"Deployment/$NS/api"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := env.Namespace(t)
			var cl client.Client = c
			if tt.readsFailAfter > 0 {
				cl = &failingDeploymentReads{Client: c, after: tt.readsFailAfter}
			}
			m := newManagerWith(cl, ns, func(o *apply.Options) {
				o.Wait.Timeout = tt.timeout
				o.Wait.Around = tt.around
				o.Wait.Progress = func(p apply.WaveProgress) {
					if tt.fail && p.Healthy == 0 {
						setDeploymentStatus(t, ns, "api", false)
					}
				}
			})
			p := planOf(fromGit(t, ns, "apps/api.yaml", apiDeployment), configMapInWave(t, ns, "after", 1))

			cs, err := m.Apply(context.Background(), p)

			var ue *apply.UnhealthyError
			if !errors.As(err, &ue) {
				t.Fatalf("error is %T, want *apply.UnhealthyError: %v", err, err)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error is not %v: %v", tt.wantIs, err)
			}
			var want []string
			for _, w := range tt.wantMsg {
				want = append(want, strings.ReplaceAll(w, "$NS", ns))
			}
			expectContains(t, err, want...)
			if len(ue.Unhealthy) != 1 || ue.Unhealthy[0].ID != (plan.ID{Group: "apps", Kind: "Deployment", Namespace: ns, Name: "api"}) {
				t.Errorf("Unhealthy = %v, want the Deployment", ue.Unhealthy)
			}
			expectActions(t, cs, "Deployment/"+ns+"/api Created")
			if get(t, "v1", "ConfigMap", ns, "after") != nil {
				t.Error("the next wave was written")
			}
		})
	}
}

// failingDeploymentReads fails every read of a Deployment after the first
// after ones with the error client-go's rate limiter gives near a deadline.
type failingDeploymentReads struct {
	client.Client
	mu    sync.Mutex
	after int
	reads int
}

func (f *failingDeploymentReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*unstructured.Unstructured); ok && obj.GetObjectKind().GroupVersionKind().Kind == "Deployment" {
		f.mu.Lock()
		f.reads++
		n := f.reads
		f.mu.Unlock()
		if n > f.after {
			return errors.New("client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline")
		}
	}
	return f.Client.Get(ctx, key, obj, opts...)
}

func TestConfigMapsAreHealthyAtOnce(t *testing.T) {
	ns := env.Namespace(t)
	var log progressLog
	var around []int
	m := newManager(ns, func(o *apply.Options) {
		o.Wait.Last = true
		o.Wait.Progress = log.record
		o.Wait.Around = func(ctx context.Context, w apply.Wave, wait func(context.Context) error) error {
			around = append(around, w.Number)
			return wait(ctx)
		}
	})
	p := planOf(configMapInWave(t, ns, "first", 0), configMapInWave(t, ns, "second", 5))

	cs := applyOK(t, m, p)

	expectActions(t, cs, "ConfigMap/"+ns+"/first Created", "ConfigMap/"+ns+"/second Created")
	want := progressLog{"wave 0: 0/1 healthy", "wave 0: 1/1 healthy", "wave 1: 0/1 healthy", "wave 1: 1/1 healthy"}
	if diff := cmp.Diff(want, log); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{0, 5}, around); diff != "" {
		t.Errorf("waves waited through Around (-want +got):\n%s", diff)
	}
}

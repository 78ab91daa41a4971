package reliability

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/config/crd"
	"github.com/driftless/driftless/internal/agent"
	"github.com/driftless/driftless/internal/agent/agenttest"
	"github.com/driftless/driftless/internal/inventory"
	"github.com/driftless/driftless/internal/testenv"
)

var (
	env *testenv.Env
	// c reads and writes as the test (the admin user); the agents under
	// test run as agentUser, so that the audit log tells them apart.
	c client.Client
)

// agentUser is the user the agents run as (group system:masters).
const agentUser = "driftless-agent"

func TestMain(m *testing.M) {
	testenv.MainWithOptions(m, &env, testenv.Options{Audit: true}, setup)
}

func setup(e *testenv.Env) error {
	scheme := testenv.Scheme()
	var err error
	c, err = client.New(e.Config, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	// The agent installs the Sync CRD too; the tests create Syncs first.
	def, err := crd.SyncCRD()
	if err != nil {
		return err
	}
	return e.InstallCRDs(context.Background(), def)
}

// full reports whether the long variants run (make reliability).
func full() bool { return os.Getenv("RELIABILITY_FULL") != "" }

// agentKubeconfig returns a kubeconfig of agentUser.
func agentKubeconfig(t *testing.T) string {
	t.Helper()
	path, err := env.UserKubeconfig(agentUser, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// startInProcessAgent runs the agent as agentUser, with the options of
// agenttest changed by mutate (which may be nil), until the test ends.
// namespace is the agent's own, the one the test's Syncs are in: they act
// as the agent and may read file:// repositories, as the root Sync does.
func startInProcessAgent(t *testing.T, namespace string, mutate func(*agent.Options)) *agenttest.Agent {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", agentKubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	o := agenttest.Options(t, cfg, namespace)
	if mutate != nil {
		mutate(&o)
	}
	return agenttest.Start(t, o)
}

// newSync creates a Sync of repo's main branch in namespace ns, every
// second, into ns, letting mutate adjust it.
func newSync(t *testing.T, ns, name, url string, mutate func(*v1alpha1.Sync)) client.ObjectKey {
	t.Helper()
	s := &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.SyncSpec{
			Source:          v1alpha1.Source{Git: v1alpha1.GitSource{URL: url, Branch: "main"}},
			Interval:        metav1.Duration{Duration: time.Second},
			TargetNamespace: ns,
		},
	}
	if mutate != nil {
		mutate(s)
	}
	if err := c.Create(context.Background(), s); err != nil {
		t.Fatalf("create Sync: %v", err)
	}
	return client.ObjectKeyFromObject(s)
}

func getSync(key client.ObjectKey) (*v1alpha1.Sync, error) {
	var s v1alpha1.Sync
	err := c.Get(context.Background(), key, &s)
	return &s, err
}

// appliedAt checks that the Sync is Ready=True at revision.
func appliedAt(key client.ObjectKey, revision string) func() string {
	return func() string {
		s, err := getSync(key)
		if err != nil {
			return err.Error()
		}
		ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionTrue || s.Status.LastAppliedRevision != revision {
			return fmt.Sprintf("Ready = %s, lastAppliedRevision = %q, want True at %s", condString(ready), s.Status.LastAppliedRevision, revision)
		}
		return ""
	}
}

// failedAt waits until the Sync's last attempt was revision and failed,
// and returns its Ready condition.
func failedAt(t *testing.T, key client.ObjectKey, revision string, timeout time.Duration) *metav1.Condition {
	t.Helper()
	var ready *metav1.Condition
	testenv.Eventually(t, timeout, "the Sync refuses "+revision[:7], func() string {
		s, err := getSync(key)
		if err != nil {
			return err.Error()
		}
		ready = meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		if s.Status.LastAttemptedRevision != revision || ready == nil || ready.Status != metav1.ConditionFalse {
			return fmt.Sprintf("Ready = %s at attempted revision %q", condString(ready), s.Status.LastAttemptedRevision)
		}
		return ""
	})
	return ready
}

func condString(c *metav1.Condition) string {
	if c == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s/%s %q", c.Status, c.Reason, c.Message)
}

// forbiddenWrites returns the writes of the agent between from and to
// other than Events, Leases and Sync status: what a refused commit must
// never cause.
func forbiddenWrites(t *testing.T, from, to testenv.AuditMark) []string {
	t.Helper()
	writes, err := env.AuditWrites(from, to, agentUser)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, w := range writes {
		r := w.ObjectRef
		switch {
		case r.Resource == "events":
		case r.Resource == "leases" && r.APIGroup == "coordination.k8s.io":
		case r.Resource == "syncs" && r.APIGroup == v1alpha1.GroupVersion.Group && r.Subresource == "status":
		default:
			bad = append(bad, w.String())
		}
	}
	return bad
}

func mark(t *testing.T) testenv.AuditMark {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := env.AuditMark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// inventoryIDs returns the IDs the inventory of s lists, as the agent
// reads it (its Inventory, or the status of an older agent).
func inventoryIDs(t *testing.T, s *v1alpha1.Sync) []string {
	t.Helper()
	entries, unreadable, err := inventory.Read(context.Background(), c, s)
	if err != nil || unreadable != nil {
		t.Fatalf("read the inventory of Sync %s/%s: %v %v", s.Namespace, s.Name, err, unreadable)
	}
	var ids []string
	for _, e := range entries {
		ids = append(ids, inventory.Encode(e.ID))
	}
	return ids
}

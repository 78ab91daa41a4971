package testenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// auditPolicy logs write requests at level Metadata (who, what, when;
// no bodies, so no Secret values) once they completed, and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
`

// AuditLogPath is where a control plane started with Audit logs writes.
func (cp *ControlPlane) AuditLogPath() string { return filepath.Join(cp.Dir, "audit.log") }

func (cp *ControlPlane) auditPolicyPath() string { return filepath.Join(cp.Dir, "audit-policy.yaml") }

// AuditEvent is one write request as the API server's audit log recorded
// it: the fields of audit.k8s.io/v1 Event a test looks at.
type AuditEvent struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// DryRun reports whether the request was a server-side dry run, which
// writes nothing.
func (e AuditEvent) DryRun() bool { return strings.Contains(e.RequestURI, "dryRun=All") }

// String names the request the way a failing test reports it.
func (e AuditEvent) String() string {
	r := e.ObjectRef
	what := r.Resource
	if r.APIGroup != "" {
		what += "." + r.APIGroup
	}
	if r.Subresource != "" {
		what += "/" + r.Subresource
	}
	return fmt.Sprintf("%s %s %s/%s by %s (%d)", e.Verb, what, r.Namespace, r.Name, e.User.Username, e.ResponseStatus.Code)
}

// AuditMark is a point in the audit log: every request that completed
// before AuditMark was called lies before it.
type AuditMark struct{ offset int64 }

// AuditMark writes a fence (creates a ConfigMap with a unique name in
// namespace default, as the admin) and returns the point in the audit
// log just after it. The API server logs in blocking mode, so every
// request that completed before the fence's is logged before it.
func (e *Env) AuditMark(ctx context.Context) (AuditMark, error) {
	if !e.ControlPlane.Audit {
		return AuditMark{}, fmt.Errorf("the control plane was started without Options.Audit")
	}
	name := fmt.Sprintf("audit-fence-%016x", rand.Uint64())
	fence := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	if err := e.Client.Create(ctx, fence); err != nil {
		return AuditMark{}, fmt.Errorf("write the audit fence: %w", err)
	}
	defer func() { _ = e.Client.Delete(context.WithoutCancel(ctx), fence) }()
	needle := []byte(`"name":"` + name + `"`)
	for {
		data, err := os.ReadFile(e.ControlPlane.AuditLogPath())
		if err != nil && !os.IsNotExist(err) {
			return AuditMark{}, err
		}
		if i := bytes.Index(data, needle); i >= 0 {
			end := bytes.IndexByte(data[i:], '\n')
			if end >= 0 {
				return AuditMark{offset: int64(i + end + 1)}, nil
			}
		}
		select {
		case <-ctx.Done():
			return AuditMark{}, fmt.Errorf("the audit fence %s did not reach %s: %w", name, e.ControlPlane.AuditLogPath(), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// AuditWrites returns the write requests user made between two marks,
// leaving out server-side dry runs, in the order they completed.
func (e *Env) AuditWrites(from, to AuditMark, user string) ([]AuditEvent, error) {
	f, err := os.Open(e.ControlPlane.AuditLogPath())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(from.offset, 0); err != nil {
		return nil, err
	}
	var out []AuditEvent
	sc := bufio.NewScanner(io.LimitReader(f, to.offset-from.offset))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var ev AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log %s: %w", e.ControlPlane.AuditLogPath(), err)
		}
		if ev.User.Username == user && !ev.DryRun() {
			out = append(out, ev)
		}
	}
	return out, sc.Err()
}

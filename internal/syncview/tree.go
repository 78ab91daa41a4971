package syncview

import (
	"context"
	"errors"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"golang.org/x/sync/errgroup"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/apply"
	"github.com/driftless/driftless/internal/health"
	"github.com/driftless/driftless/internal/inventory"
	"github.com/driftless/driftless/internal/origin"
)

// HealthMissing is the health of an inventory object that is not in the
// cluster.
const HealthMissing = "Missing"

// Object is one object of the inventory; its JSON names are stable.
type Object struct {
	Namespace string `json:"namespace,omitempty"`
	Group     string `json:"group,omitempty"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Version   string `json:"version"`
	// Health is kstatus's status (or that of the Sync's health check
	// for its kind, whose message names the expression), or Missing.
	Health  string `json:"health"`
	Message string `json:"message,omitempty"`
	// Origin is the file (and document) in git.
	Origin string `json:"origin,omitempty"`
	// File and Line are the origin's file, its path in the repository,
	// and the line its document starts at (0 when a kustomization built it).
	File string `json:"-"`
	Line int    `json:"-"`
}

// Dependency is one Sync of spec.dependsOn.
type Dependency struct {
	Sync   string `json:"sync"`
	Ready  string `json:"ready"`
	Reason string `json:"reason,omitempty"`
	Found  bool   `json:"found"`
}

// Tree is a Sync with the objects of its inventory; its JSON names are
// stable (the output of `driftless tree -o json`).
type Tree struct {
	Sync string `json:"sync"`
	// Cluster is the cluster the Sync applies to (Sync.TargetCluster).
	Cluster   string       `json:"cluster"`
	Ready     string       `json:"ready"`
	Reason    string       `json:"reason,omitempty"`
	Revision  string       `json:"revision,omitempty"`
	DependsOn []Dependency `json:"dependsOn,omitempty"`
	Objects   []Object     `json:"objects"`
	// Unreadable says, for each inventory entry that is not an object ID,
	// what it is and what form it lacks.
	Unreadable []string `json:"unreadable,omitempty"`
	// ClusterError says why the objects' cluster (spec.kubeConfig's)
	// could not be read; their health is then Unknown.
	ClusterError string `json:"clusterError,omitempty"`
}

// ReadTree reads s's dependencies and the objects of its inventory with
// c, each object's health and origin from the cluster they are in (for a
// Sync with spec.kubeConfig, its target cluster: TargetReader), sorted by
// namespace, kind, group and name. An object that may not be read has
// health Unknown and says so, as have all of them when their cluster
// cannot be read (ClusterError says why); only a failure to read a
// dependency or the inventory fails.
func ReadTree(ctx context.Context, c client.Reader, s *v1alpha1.Sync) (Tree, error) {
	key := client.ObjectKeyFromObject(s)
	r := Tree{Sync: key.String(), Cluster: s.TargetCluster(), Revision: s.Status.LastAppliedRevision, Objects: []Object{}}
	r.Ready, r.Reason, _ = ReadyOf(s)
	for _, d := range s.Spec.DependsOn {
		dk := client.ObjectKey{Namespace: d.Namespace, Name: d.Name}
		if dk.Namespace == "" {
			dk.Namespace = s.Namespace
		}
		dep := Dependency{Sync: dk.String(), Ready: "Unknown"}
		var ds v1alpha1.Sync
		if err := c.Get(ctx, dk, &ds); err == nil {
			dep.Found = true
			dep.Ready, dep.Reason, _ = ReadyOf(&ds)
		} else if !apierrors.IsNotFound(err) {
			return Tree{}, fmt.Errorf("read Sync %s, which %s depends on: %w", dk, key, err)
		}
		r.DependsOn = append(r.DependsOn, dep)
	}
	entries, unreadable, err := inventory.Read(ctx, c, s)
	if err != nil {
		return Tree{}, err
	}
	r.Unreadable = ErrorLines(unreadable)
	for _, e := range entries {
		id := e.ID
		r.Objects = append(r.Objects, Object{Namespace: id.Namespace, Group: id.Group, Kind: id.Kind, Name: id.Name, Version: e.Version})
	}
	// The Sync's own health checks decide the kinds they name, as in its
	// waits; a spec that does not compile (the Sync is InvalidSpec) has
	// none.
	checks, _ := health.Compile(s.Spec.HealthChecks)
	target, _, err := TargetReader(ctx, c, s)
	if err != nil {
		r.ClusterError = err.Error()
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range r.Objects {
		if target == nil {
			r.Objects[i].Health, r.Objects[i].Message = string(status.UnknownStatus), "in cluster "+r.Cluster
			continue
		}
		g.Go(func() error {
			liveHealth(gctx, target, checks, &r.Objects[i])
			return nil
		})
	}
	_ = g.Wait()
	sort.SliceStable(r.Objects, func(i, j int) bool {
		a, b := r.Objects[i], r.Objects[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		return a.Name < b.Name
	})
	return r, nil
}

// ReadObject is o, an object of s, with its health and origin read from
// the cluster with c, as ReadTree reads each object.
func ReadObject(ctx context.Context, c client.Reader, s *v1alpha1.Sync, o Object) Object {
	checks, _ := health.Compile(s.Spec.HealthChecks)
	liveHealth(ctx, c, checks, &o)
	return o
}

// liveHealth reads o from the cluster and sets its health (by checks for
// the kinds they name) and origin.
func liveHealth(ctx context.Context, c client.Reader, checks *health.Checks, o *Object) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: o.Group, Version: o.Version, Kind: o.Kind})
	err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, u)
	switch {
	case apierrors.IsNotFound(err):
		o.Health, o.Message = HealthMissing, "not in the cluster"
		return
	case meta.IsNoMatchError(err):
		o.Health, o.Message = HealthMissing, "the cluster no longer serves its kind"
		return
	case apierrors.IsForbidden(err):
		o.Health, o.Message = string(status.UnknownStatus), "you may not read it"
		return
	case err != nil:
		o.Health, o.Message = string(status.UnknownStatus), err.Error()
		return
	}
	st, msg := apply.HealthWith(ctx, checks, u)
	o.Health, o.Message = string(st), msg
	if a, ok := u.GetAnnotations()[v1alpha1.OriginAnnotation]; ok {
		if from, _, err := origin.Parse(a); err == nil {
			o.Origin, o.File, o.Line = from.String(), from.Path, from.Line
		}
	}
}

// ErrorLines are the messages of the errors err joins (under its one
// wrapping message, as inventory.FromStatus returns them); err's own
// message when it joins none; none for nil.
func ErrorLines(err error) []string {
	if err == nil {
		return nil
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			var lines []string
			for _, one := range j.Unwrap() {
				lines = append(lines, one.Error())
			}
			return lines
		}
	}
	return []string{err.Error()}
}

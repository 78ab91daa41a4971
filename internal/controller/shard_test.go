package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/driftless/driftless/api/v1alpha1"
)

// Which agent caches what: the Syncs by their shard label, the objects
// they apply by the sync-shard label the render stamps, with the three
// kinds of agent (every Sync, the unlabelled ones, one shard) kept apart.
func TestShardSelectsItsSyncsAndTheirObjects(t *testing.T) {
	unlabelled := map[string]string{}
	inA := map[string]string{v1alpha1.ShardLabel: "a"}
	inB := map[string]string{v1alpha1.ShardLabel: "b"}
	objectOf := func(shard string) labels.Set {
		l := labels.Set{v1alpha1.SyncLabel: "ns.web"}
		if shard != "" {
			l[v1alpha1.SyncShardLabel] = shard
		}
		return l
	}
	for _, tc := range []struct {
		name         string
		shard        *Shard
		lease        string
		serves       []map[string]string
		refuses      []map[string]string
		objects      []string
		otherObjects []string
	}{
		{"an agent without --shard serves every Sync", nil, "driftless-agent",
			[]map[string]string{unlabelled, inA, inB}, nil, []string{"", "a", "b"}, nil},
		{"--shard='' serves the Syncs without a shard label", &Shard{}, "driftless-agent-unlabelled",
			[]map[string]string{unlabelled}, []map[string]string{inA, inB}, []string{""}, []string{"a", "b"}},
		{"--shard=a serves shard a only", &Shard{Name: "a"}, "driftless-agent-shard-a",
			[]map[string]string{inA}, []map[string]string{unlabelled, inB}, []string{"a"}, []string{"", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.shard.LeaseName(); got != tc.lease {
				t.Errorf("lease %q, want %q", got, tc.lease)
			}
			for _, l := range tc.serves {
				if !tc.shard.Serves(l) {
					t.Errorf("does not serve a Sync labelled %v", l)
				}
			}
			for _, l := range tc.refuses {
				if tc.shard.Serves(l) {
					t.Errorf("serves a Sync labelled %v", l)
				}
			}
			managed := ShardCacheOptions(tc.shard).DefaultLabelSelector
			for _, s := range tc.objects {
				if !managed.Matches(objectOf(s)) {
					t.Errorf("does not cache an object of a Sync of shard %q", s)
				}
			}
			for _, s := range tc.otherObjects {
				if managed.Matches(objectOf(s)) {
					t.Errorf("caches an object of a Sync of shard %q", s)
				}
			}
			if managed.Matches(labels.Set{v1alpha1.SyncShardLabel: "a"}) {
				t.Error("caches an object no Sync manages")
			}
		})
	}
}

func TestShardNamesAreLabelsThatFitALease(t *testing.T) {
	for name, ok := range map[string]bool{"": true, "shard-1": true, "a": true, "Shard_1": false, "team.a": false, "-a": false} {
		if err := CheckShardName(name); (err == nil) != ok {
			t.Errorf("CheckShardName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

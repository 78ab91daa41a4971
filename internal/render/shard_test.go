package render

import (
	"testing"

	"github.com/driftless/driftless/api/v1alpha1"
)

// A sharded Sync's objects carry its shard in driftless.dev/sync-shard,
// which its shard's drift watches select on; a Sync object in git keeps
// its own driftless.dev/shard; an unsharded Sync's objects get no
// sync-shard label.
func TestRenderStampsTheSyncsShardBesideTheSyncLabel(t *testing.T) {
	root := checkout(t, map[string]string{
		"config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: team\n  labels:\n    driftless.dev/shard: from-git\n",
	})
	for _, tc := range []struct{ shard, want string }{{"shard-2", "shard-2"}, {"", ""}} {
		objs, err := Render(Options{Root: root, Scope: cluster, SyncLabel: "team.web", SyncShard: tc.shard, Revision: "0123456789"})
		if err != nil || len(objs) != 1 {
			t.Fatalf("render: %v, %d objects", err, len(objs))
		}
		l := objs[0].decoded().GetLabels()
		got, stamped := l[v1alpha1.SyncShardLabel]
		if got != tc.want || stamped != (tc.want != "") {
			t.Errorf("Sync of shard %q: %s = %q (set %v), want %q", tc.shard, v1alpha1.SyncShardLabel, got, stamped, tc.want)
		}
		if l[v1alpha1.ShardLabel] != "from-git" || l[v1alpha1.SyncLabel] != "team.web" {
			t.Errorf("Sync of shard %q: labels %v; want git's %s and the Sync label kept", tc.shard, l, v1alpha1.ShardLabel)
		}
	}
}

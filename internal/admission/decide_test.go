package admission

import (
	"strings"
	"testing"
)

func TestDecide(t *testing.T) {
	id := Identity{AgentUser: "system:serviceaccount:driftless-system:driftless", BreakGlassGroup: "oncall"}
	managed := Input{Object: "ConfigMap apps/app", Sync: "driftless-system/default", SyncFound: true, Reverted: true, File: "workloads/app.yaml",
		User: "alice", Groups: []string{"system:authenticated"}, FieldManager: "kubectl-edit"}
	with := func(change func(*Input)) Input { in := managed; change(&in); return in }
	tests := []struct {
		name        string
		in          Input
		wantAllowed bool
		wantWarning string
		wantMessage string
	}{
		{name: "a person's edit of a managed object is allowed with a warning that it will be reverted", in: managed, wantAllowed: true,
			wantWarning: "managed by driftless driftless-system/default from workloads/app.yaml; this change will be reverted — change it in git"},
		{name: "with self-heal off the warning says the change stays but differs from git",
			in:          with(func(in *Input) { in.Reverted, in.NotRevertedWhy = false, "self-heal is off" }),
			wantAllowed: true, wantWarning: "managed by driftless driftless-system/default from workloads/app.yaml; this change will not be reverted (self-heal is off) but differs from git — change it in git"},
		{name: "an object of unknown origin is warned without a file", in: with(func(in *Input) { in.File = "" }), wantAllowed: true,
			wantWarning: "managed by driftless driftless-system/default; this change will be reverted — change it in git"},
		{name: "an unmanaged object passes silently", in: with(func(in *Input) { in.Sync = "" }), wantAllowed: true},
		{name: "an object labelled for a Sync that does not exist passes silently", in: with(func(in *Input) { in.SyncFound = false }), wantAllowed: true},
		{name: "a write that changes nothing passes silently", in: with(func(in *Input) { in.NoChange = true; in.Protected = true }), wantAllowed: true},
		{name: "the agent's own write of a protected object passes silently",
			in:          with(func(in *Input) { in.User, in.FieldManager, in.Protected = id.AgentUser, "driftless", true }),
			wantAllowed: true},
		{name: "a person sharing the agent's user is still warned when kubectl names its field manager",
			in:          with(func(in *Input) { in.User = id.AgentUser }),
			wantAllowed: true, wantWarning: "this change will be reverted"},
		{name: "the autoscaler in kube-system passes silently even on a protected object",
			in: with(func(in *Input) {
				in.User, in.Groups, in.Protected = "system:serviceaccount:kube-system:horizontal-pod-autoscaler", []string{"system:serviceaccounts:kube-system"}, true
			}),
			wantAllowed: true},
		{name: "a person's edit of a protected object is refused, naming the Sync, the file and the break-glass group",
			in:          with(func(in *Input) { in.Protected = true }),
			wantMessage: "ConfigMap apps/app is protected by driftless (driftless.dev/protect=deny): it is managed by driftless driftless-system/default from workloads/app.yaml — change it in git, or as a member of the break-glass group oncall"},
		{name: "a person's delete of a managed object is allowed with a warning that it will be re-created",
			in: with(func(in *Input) { in.Delete, in.FieldManager = true, "" }), wantAllowed: true,
			wantWarning: "managed by driftless driftless-system/default from workloads/app.yaml; it will be re-created — delete it in git"},
		{name: "with the Sync suspended the delete warning says the object stays deleted but is still in git",
			in: with(func(in *Input) {
				in.Delete, in.FieldManager, in.Reverted, in.NotRevertedWhy = true, "", false, "the Sync is suspended"
			}),
			wantAllowed: true, wantWarning: "managed by driftless driftless-system/default from workloads/app.yaml; it will not be re-created (the Sync is suspended) but is still in git — delete it in git"},
		{name: "a person's delete of a protected object is refused, saying to delete it in git",
			in:          with(func(in *Input) { in.Delete, in.FieldManager, in.Protected = true, "", true }),
			wantMessage: "ConfigMap apps/app is protected by driftless (driftless.dev/protect=deny): it is managed by driftless driftless-system/default from workloads/app.yaml — delete it in git, or as a member of the break-glass group oncall"},
		{name: "the agent's own delete (its prune pass) of a protected object passes silently",
			in:          with(func(in *Input) { in.Delete, in.User, in.FieldManager, in.Protected = true, id.AgentUser, "", true }),
			wantAllowed: true},
		{name: "the break-glass group may delete a protected object, with a warning",
			in: with(func(in *Input) {
				in.Delete, in.FieldManager, in.Protected, in.Groups = true, "", true, []string{"oncall"}
			}),
			wantAllowed: true, wantWarning: "allowed for break-glass group oncall. managed by driftless driftless-system/default from workloads/app.yaml; it will be re-created — delete it in git"},
		{name: "the agent's write as the Sync's ServiceAccount (impersonation) of a protected object passes silently",
			in: with(func(in *Input) {
				in.SyncUser = "system:serviceaccount:driftless-system:driftless-root"
				in.User, in.FieldManager, in.Protected, in.AgentImpersonation = in.SyncUser, "driftless", true, true
			}),
			wantAllowed: true},
		{name: "the agent's prune as the Sync's ServiceAccount of a protected object passes silently",
			in: with(func(in *Input) {
				in.SyncUser = "system:serviceaccount:driftless-system:driftless-root"
				in.User, in.FieldManager, in.Protected, in.Delete, in.AgentImpersonation = in.SyncUser, "", true, true, true
			}),
			wantAllowed: true},
		{name: "the Sync's ServiceAccount's own token, without the agent's extra, may not write a protected object as field manager driftless",
			in: with(func(in *Input) {
				in.SyncUser = "system:serviceaccount:driftless-system:driftless-root"
				in.User, in.FieldManager, in.Protected = in.SyncUser, "driftless", true
			}),
			wantMessage: "ConfigMap apps/app is protected by driftless (driftless.dev/protect=deny): it is managed by driftless driftless-system/default from workloads/app.yaml — change it in git, or as a member of the break-glass group oncall"},
		{name: "the Sync's ServiceAccount's own token, without the agent's extra, may not delete a protected object",
			in: with(func(in *Input) {
				in.SyncUser = "system:serviceaccount:driftless-system:driftless-root"
				in.User, in.FieldManager, in.Protected, in.Delete = in.SyncUser, "", true, true
			}),
			wantMessage: "ConfigMap apps/app is protected by driftless (driftless.dev/protect=deny): it is managed by driftless driftless-system/default from workloads/app.yaml — delete it in git, or as a member of the break-glass group oncall"},
		{name: "kubectl as the Sync's ServiceAccount is still refused on a protected object",
			in: with(func(in *Input) {
				in.SyncUser = "system:serviceaccount:driftless-system:driftless-root"
				in.User, in.Protected = in.SyncUser, true
			}),
			wantMessage: "ConfigMap apps/app is protected by driftless (driftless.dev/protect=deny): it is managed by driftless driftless-system/default from workloads/app.yaml — change it in git, or as a member of the break-glass group oncall"},
		{name: "the break-glass group may edit a protected object, with a warning",
			in:          with(func(in *Input) { in.Protected, in.Groups = true, []string{"oncall"} }),
			wantAllowed: true, wantWarning: "ConfigMap apps/app is protected (driftless.dev/protect=deny); allowed for break-glass group oncall. managed by driftless"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.in, id)
			if got.Allowed != tt.wantAllowed {
				t.Errorf("allowed = %v, want %v (%+v)", got.Allowed, tt.wantAllowed, got)
			}
			if (tt.wantWarning == "") != (got.Warning == "") || !strings.Contains(got.Warning, tt.wantWarning) {
				t.Errorf("warning = %q, want one containing %q", got.Warning, tt.wantWarning)
			}
			if got.Message != tt.wantMessage {
				t.Errorf("message = %q, want %q", got.Message, tt.wantMessage)
			}
		})
	}
	t.Run("without a break-glass group the refusal names none", func(t *testing.T) {
		got := Decide(with(func(in *Input) { in.Protected = true }), Identity{AgentUser: id.AgentUser})
		if got.Allowed || strings.Contains(got.Message, "break-glass") {
			t.Errorf("got %+v, want a refusal that names no break-glass group", got)
		}
	})
}

func TestSyncUser(t *testing.T) {
	id := Identity{AgentNamespace: "driftless-system", DefaultServiceAccount: "sync"}
	tests := []struct {
		name, ns, serviceAccount, want string
	}{
		{name: "a Sync that names a ServiceAccount acts as it", ns: "driftless-system", serviceAccount: "driftless-root", want: "system:serviceaccount:driftless-system:driftless-root"},
		{name: "a Sync of the agent's namespace that names none acts as the agent", ns: "driftless-system", want: ""},
		{name: "a tenant Sync that names none acts as the default ServiceAccount", ns: "shop", want: "system:serviceaccount:shop:sync"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SyncUser(tt.ns, tt.serviceAccount, id); got != tt.want {
				t.Errorf("SyncUser(%q, %q) = %q, want %q", tt.ns, tt.serviceAccount, got, tt.want)
			}
		})
	}
}

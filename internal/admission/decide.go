package admission

import (
	"fmt"
	"slices"
	"strings"
)

// ProtectAnnotation set to ProtectDeny on a managed object makes the
// webhook refuse edits and deletes of it by anyone but the agent and the
// break-glass group.
const (
	ProtectAnnotation = "driftless.dev/protect"
	ProtectDeny       = "deny"
)

// Input is what Decide needs to know about one write.
type Input struct {
	// Object names the object written, as "Deployment web/api".
	Object string
	// Sync is the managing Sync's "namespace/name"; empty when the object
	// is not managed (no or a malformed driftless.dev/sync label).
	Sync string
	// SyncFound is false when the label names a Sync that does not exist.
	SyncFound bool
	// Reverted reports whether the Sync reverts changes made in the
	// cluster: self-heal on and not suspended. NotRevertedWhy says why not
	// ("self-heal is off", "the Sync is suspended").
	Reverted       bool
	NotRevertedWhy string
	// File is the file in git the object came from; empty if unknown.
	File string
	// Protected is true when the object (before or after the write) is
	// annotated driftless.dev/protect=deny.
	Protected bool
	// NoChange is true when the write changes nothing but bookkeeping
	// (resourceVersion, managedFields, status).
	NoChange bool
	// Delete is true when the write deletes the object.
	Delete bool

	// SyncUser is the user the agent writes the Sync's objects as when the
	// Sync acts as a ServiceAccount (impersonation):
	// system:serviceaccount:<namespace>:<name>; empty when it acts as the
	// agent itself.
	SyncUser string

	// User and Groups are the writer's; FieldManager the one it named.
	User         string
	Groups       []string
	FieldManager string
	// AgentImpersonation is true when the request carries the user extra
	// v1alpha1.AgentExtraKey=AgentExtraValue, which only the agent's impersonating
	// clients set (setting it takes the right to impersonate it).
	AgentImpersonation bool
}

// Identity says whose writes are the agent's own and who may break glass.
type Identity struct {
	// AgentUser is the agent's user name (its service account). Writes by
	// it with a field manager starting with "driftless" are the agent's
	// own: when a person shares the agent's user (a local kubeconfig) their
	// kubectl writes still name kubectl's field managers.
	AgentUser string
	// BreakGlassGroup may edit protected objects; empty: nobody.
	BreakGlassGroup string
	// AgentNamespace and DefaultServiceAccount are the agent's: a Sync
	// outside AgentNamespace that names no ServiceAccount acts as
	// DefaultServiceAccount of its namespace (--default-service-account).
	AgentNamespace        string
	DefaultServiceAccount string
}

// Decision is the webhook's answer to one write.
type Decision struct {
	Allowed bool
	// Warning is shown by kubectl as "Warning: …"; empty for none.
	Warning string
	// Message says why a write is refused.
	Message string
}

// Decide returns what the webhook answers to one write of a managed
// object. The agent's own writes and those of the cluster's own
// components pass silently; others are warned, and refused when the
// object is protected unless the writer is in the break-glass group.
func Decide(in Input, id Identity) Decision {
	if in.Sync == "" || !in.SyncFound || in.NoChange || passesSilently(in, id) || actsForSync(in) {
		return Decision{Allowed: true}
	}
	from := ""
	if in.File != "" {
		from = " from " + in.File
	}
	managed := fmt.Sprintf("managed by driftless %s%s", in.Sync, from)
	warning := managed + "; this change will be reverted — change it in git"
	inGit := "change it in git"
	switch {
	case in.Delete && in.Reverted:
		warning, inGit = managed+"; it will be re-created — delete it in git", "delete it in git"
	case in.Delete:
		warning, inGit = fmt.Sprintf("%s; it will not be re-created (%s) but is still in git — delete it in git", managed, in.NotRevertedWhy), "delete it in git"
	case !in.Reverted:
		warning = fmt.Sprintf("%s; this change will not be reverted (%s) but differs from git — change it in git", managed, in.NotRevertedWhy)
	}
	if !in.Protected {
		return Decision{Allowed: true, Warning: warning}
	}
	if id.BreakGlassGroup != "" && slices.Contains(in.Groups, id.BreakGlassGroup) {
		return Decision{Allowed: true, Warning: fmt.Sprintf("%s is protected (%s=%s); allowed for break-glass group %s. %s", in.Object, ProtectAnnotation, ProtectDeny, id.BreakGlassGroup, warning)}
	}
	msg := fmt.Sprintf("%s is protected by driftless (%s=%s): it is %s — %s", in.Object, ProtectAnnotation, ProtectDeny, managed, inGit)
	if id.BreakGlassGroup != "" {
		msg += fmt.Sprintf(", or as a member of the break-glass group %s", id.BreakGlassGroup)
	}
	return Decision{Allowed: false, Message: msg}
}

// passesSilently reports whether the writer is the agent or the cluster
// itself, whose writes are never warned about nor refused.
func passesSilently(in Input, id Identity) bool { return isAgent(in, id) || isSystem(in) }

// isAgent reports whether the write is the agent's own, as itself.
func isAgent(in Input, id Identity) bool { return agentWrite(in, id.AgentUser) }

// actsForSync reports whether the write is the agent's as the
// ServiceAccount the managing Sync acts as: by that user, impersonated
// with the agent's extra (the ServiceAccount's own token does not carry
// it).
func actsForSync(in Input) bool { return in.AgentImpersonation && agentWrite(in, in.SyncUser) }

// agentWrite reports whether the write is by user with the agent's field
// manager. A delete names no field manager, so any delete by user (the
// agent's prune pass) counts.
func agentWrite(in Input, user string) bool {
	return user != "" && in.User == user && (in.Delete || strings.HasPrefix(in.FieldManager, "driftless"))
}

// SyncUser is the user the agent acts as for a Sync of namespace ns that
// names serviceAccount (its spec.serviceAccountName, possibly empty):
// "" when it acts as itself.
func SyncUser(ns, serviceAccount string, id Identity) string {
	if serviceAccount == "" && ns != id.AgentNamespace && id.AgentNamespace != "" {
		serviceAccount = id.DefaultServiceAccount
	}
	if serviceAccount == "" {
		return ""
	}
	return "system:serviceaccount:" + ns + ":" + serviceAccount
}

// isSystem reports whether the writer is a component of the cluster
// itself (controller manager, scheduler, kubelets, kube-system service
// accounts such as the autoscalers), whose writes no person sees and
// whose refusal would break the cluster.
func isSystem(in Input) bool {
	switch {
	case in.User == "system:kube-controller-manager", in.User == "system:kube-scheduler", in.User == "system:apiserver",
		strings.HasPrefix(in.User, "system:node:"):
		return true
	}
	return slices.Contains(in.Groups, "system:serviceaccounts:kube-system") || slices.Contains(in.Groups, "system:nodes")
}

package inventory

import (
	"fmt"
	"strings"

	"github.com/driftless/driftless/internal/plan"
)

// Encode returns the inventory form of id: "<group>/<Kind>/<namespace>/<name>",
// with empty segments for the core group and for cluster-scoped objects
// (such as "/ConfigMap/shop/app" or "rbac.authorization.k8s.io/ClusterRole//system:admin_x").
// No segment can hold "/": groups are DNS subdomains, kinds are
// identifiers, namespaces DNS labels, and the API refuses "/" in names.
func Encode(id plan.ID) string {
	return id.Group + "/" + id.Kind + "/" + id.Namespace + "/" + id.Name
}

// Decode parses an inventory ID: the form Encode writes, or the legacy
// "<namespace>_<name>_<group>_<kind>" of earlier versions. The legacy form
// is read as namespace up to the first "_" and group and kind after the
// last two, so names holding "_" (legal for RBAC objects) read back whole.
func Decode(key string) (plan.ID, error) {
	if strings.Contains(key, "/") {
		parts := strings.Split(key, "/")
		if len(parts) != 4 || parts[1] == "" || parts[3] == "" {
			return plan.ID{}, fmt.Errorf("inventory entry %q is not <group>/<Kind>/<namespace>/<name>", key)
		}
		return plan.ID{Group: parts[0], Kind: parts[1], Namespace: parts[2], Name: parts[3]}, nil
	}
	ns, rest, ok := strings.Cut(key, "_")
	if !ok {
		return plan.ID{}, fmt.Errorf("inventory entry %q is neither <group>/<Kind>/<namespace>/<name> nor the legacy <namespace>_<name>_<group>_<kind>", key)
	}
	k := strings.LastIndex(rest, "_")
	if k < 0 {
		return plan.ID{}, fmt.Errorf("inventory entry %q is not <namespace>_<name>_<group>_<kind>", key)
	}
	kind := rest[k+1:]
	rest = rest[:k]
	g := strings.LastIndex(rest, "_")
	if g < 0 {
		return plan.ID{}, fmt.Errorf("inventory entry %q is not <namespace>_<name>_<group>_<kind>", key)
	}
	name, group := rest[:g], rest[g+1:]
	if name == "" || kind == "" {
		return plan.ID{}, fmt.Errorf("inventory entry %q is not <namespace>_<name>_<group>_<kind>", key)
	}
	return plan.ID{Namespace: ns, Name: name, Group: group, Kind: kind}, nil
}

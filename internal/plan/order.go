package plan

// Rank is an object's place in the apply order: lower ranks are applied
// first and pruned last.
type Rank int

// The apply order by kind. Objects that others depend on come first, so a
// Namespace is created before what lives in it whatever the file names,
// and admission webhooks come last, so they cannot block the objects they
// would need to serve.
const (
	RankCRD Rank = iota
	RankNamespace
	RankClusterPolicy // cluster-scoped RBAC, classes, quotas
	RankServiceAccount
	RankSecret
	RankConfig // ConfigMaps, storage claims
	RankRBAC
	RankService
	RankWorkload
	RankOther // everything else, including custom resources
	RankWebhook
)

var rankByGroupKind = map[string]Rank{
	"apiextensions.k8s.io/CustomResourceDefinition": RankCRD,
	"/Namespace":                            RankNamespace,
	"/ResourceQuota":                        RankClusterPolicy,
	"/LimitRange":                           RankClusterPolicy,
	"rbac.authorization.k8s.io/ClusterRole": RankClusterPolicy,
	"rbac.authorization.k8s.io/ClusterRoleBinding": RankClusterPolicy,
	"storage.k8s.io/StorageClass":                  RankClusterPolicy,
	"scheduling.k8s.io/PriorityClass":              RankClusterPolicy,
	"networking.k8s.io/IngressClass":               RankClusterPolicy,
	"node.k8s.io/RuntimeClass":                     RankClusterPolicy,
	"/PersistentVolume":                            RankClusterPolicy,
	"/ServiceAccount":                              RankServiceAccount,
	"/Secret":                                      RankSecret,
	"/ConfigMap":                                   RankConfig,
	"/PersistentVolumeClaim":                       RankConfig,
	"rbac.authorization.k8s.io/Role":               RankRBAC,
	"rbac.authorization.k8s.io/RoleBinding":        RankRBAC,
	"/Service":                                     RankService,
	"apps/Deployment":                              RankWorkload,
	"apps/StatefulSet":                             RankWorkload,
	"apps/DaemonSet":                               RankWorkload,
	"apps/ReplicaSet":                              RankWorkload,
	"/ReplicationController":                       RankWorkload,
	"/Pod":                                         RankWorkload,
	"batch/Job":                                    RankWorkload,
	"batch/CronJob":                                RankWorkload,
	"admissionregistration.k8s.io/MutatingWebhookConfiguration":     RankWebhook,
	"admissionregistration.k8s.io/ValidatingWebhookConfiguration":   RankWebhook,
	"admissionregistration.k8s.io/ValidatingAdmissionPolicy":        RankWebhook,
	"admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding": RankWebhook,
	"admissionregistration.k8s.io/MutatingAdmissionPolicy":          RankWebhook,
	"admissionregistration.k8s.io/MutatingAdmissionPolicyBinding":   RankWebhook,
	"apiregistration.k8s.io/APIService":                             RankWebhook,
}

// RankOf returns the apply rank of an object's group and kind.
func RankOf(id ID) Rank {
	if r, ok := rankByGroupKind[id.Group+"/"+id.Kind]; ok {
		return r
	}
	return RankOther
}

// less orders IDs by rank, then namespace, kind and name, never by the file
// an object came from.
func less(a, b ID) bool {
	if ra, rb := RankOf(a), RankOf(b); ra != rb {
		return ra < rb
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	if a.Group != b.Group {
		return a.Group < b.Group
	}
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	return a.Name < b.Name
}

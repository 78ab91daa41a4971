package image

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/driftless/driftless/internal/image/policy"
)

// Options configure the image automation controllers.
type Options struct {
	// Concurrency is how many policies are scanned at once.
	Concurrency int
	// Scan bounds the registry requests (retries, rate per registry).
	Scan policy.ScanOptions
}

// DefaultOptions returns the agent's defaults.
func DefaultOptions() Options {
	return Options{Concurrency: 2, Scan: policy.DefaultScanOptions()}
}

// Setup registers the image automation controllers with mgr, whose cache
// must hold ImagePolicies and Syncs (controller.CacheOptions does).
func Setup(mgr ctrl.Manager, opts Options) error {
	policies := &PolicyReconciler{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Scanner:  policy.NewScanner(opts.Scan),
		Recorder: mgr.GetEventRecorder("driftless-image"),
	}
	return policies.SetupWithManager(mgr, max(opts.Concurrency, 1))
}

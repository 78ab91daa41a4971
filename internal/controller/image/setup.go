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
	// CacheDir holds the scratch clones of image updates.
	CacheDir string
}

// DefaultOptions returns the agent's defaults.
func DefaultOptions() Options {
	return Options{Concurrency: 2, Scan: policy.DefaultScanOptions()}
}

// Setup registers the image automation controllers with mgr, whose cache
// must hold ImagePolicies and Syncs (controller.CacheOptions does).
func Setup(mgr ctrl.Manager, opts Options) error {
	scanner := policy.NewScanner(opts.Scan)
	recorder := mgr.GetEventRecorder("driftless-image")
	policies := &PolicyReconciler{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Scanner:  scanner,
		Recorder: recorder,
	}
	if err := policies.SetupWithManager(mgr, max(opts.Concurrency, 1)); err != nil {
		return err
	}
	updates := &UpdateReconciler{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Scanner:  scanner,
		Recorder: recorder,
		CacheDir: opts.CacheDir,
	}
	return updates.SetupWithManager(mgr)
}

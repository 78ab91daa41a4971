package image

import (
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/engine"
	"github.com/driftless/driftless/internal/image/policy"
	"github.com/driftless/driftless/internal/notify"
	"github.com/driftless/driftless/internal/source"
)

// Options configure the image automation controllers.
type Options struct {
	// Concurrency is how many policies are scanned at once.
	Concurrency int
	// Scan bounds the registry requests (retries, rate per registry).
	Scan policy.ScanOptions
	// CacheDir holds the scratch checkouts of image updates.
	CacheDir string
	// Mirror is the git mirror the Syncs read from; updates fetch into it
	// and take their checkouts from it. Nil: a mirror per Sync in CacheDir.
	Mirror *source.Mirror
	// AgentNamespace is the agent's namespace: Syncs elsewhere may use
	// only the ImagePolicies of their own namespace.
	AgentNamespace string
	// ReaderOf, when set, returns what reads the Secrets a Sync names
	// (the Sync controller's ReaderOf); nil: the agent's reader.
	ReaderOf func(*v1alpha1.Sync) (engine.Reader, error)
	// Notify, when set, wraps the recorder so that image updates of a
	// Sync reach the agent's notification targets (the Sync
	// controller's Notify).
	Notify func(notify.Recorder) notify.Recorder
}

// DefaultOptions returns the agent's defaults.
func DefaultOptions() Options {
	return Options{Concurrency: 2, Scan: policy.DefaultScanOptions()}
}

// CacheOptions adds what the image controllers read to opts (the Sync
// controller's cache options): the ImagePolicies that policies selects
// (by their driftless.dev/shard label, as the shard's Syncs are;
// labels.Everything for every ImagePolicy).
func CacheOptions(opts cache.Options, policies labels.Selector) cache.Options {
	byObject := make(map[client.Object]cache.ByObject, len(opts.ByObject)+1)
	for k, v := range opts.ByObject {
		byObject[k] = v
	}
	byObject[&v1alpha1.ImagePolicy{}] = cache.ByObject{Label: policies}
	opts.ByObject = byObject
	return opts
}

// Setup registers the image automation controllers with mgr, whose cache
// must hold ImagePolicies and Syncs (see CacheOptions).
func Setup(mgr ctrl.Manager, opts Options) error {
	scanner := policy.NewScanner(opts.Scan)
	var recorder EventRecorder = mgr.GetEventRecorder("driftless-image")
	if opts.Notify != nil {
		recorder = opts.Notify(recorder)
	}
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
		Mirror:   opts.Mirror,
		ReaderOf: opts.ReaderOf,

		AgentNamespace: opts.AgentNamespace,
	}
	return updates.SetupWithManager(mgr)
}

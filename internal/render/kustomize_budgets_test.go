package render

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRenderBudgetsBoundKustomizations(t *testing.T) {
	// Two overlays of one base, each with its own prefix: the base is read
	// twice.
	big := configMap("big") + "data:\n  x: \"" + strings.Repeat("x", 1500) + "\"\n"
	twice := map[string]string{
		"app/kustomization.yaml":  "resources: [../a, ../b]\n",
		"a/kustomization.yaml":    "resources: [../base]\nnamePrefix: a-\n",
		"b/kustomization.yaml":    "resources: [../base]\nnamePrefix: b-\n",
		"base/kustomization.yaml": "resources: [big.yaml]\n",
		"base/big.yaml":           big,
	}
	tests := []struct {
		name    string
		files   map[string]string
		paths   []string
		budgets Budgets
		want    []string
	}{{
		name:    "more objects than MaxObjects",
		files:   shop,
		paths:   []string{"apps/web/overlays/production"},
		budgets: Budgets{MaxObjects: 3},
		want:    []string{"apps/web/overlays/production/kustomization.yaml → apps/web/components/pdb/pdb.yaml: PodDisruptionBudget/shop-production/prod-web-eu: render budget exceeded: this is object 4 of the render, over the limit of 3; render less (fewer paths, or split them across Syncs), or raise the agent's --render-max-objects"},
	}, {
		name:    "a base read twice counts twice against MaxBytes",
		files:   twice,
		paths:   []string{"app"},
		budgets: Budgets{MaxBytes: 3 << 10},
		want:    []string{"app/kustomization.yaml: base/big.yaml: render budget exceeded: the files read before this one hold 1.8 KiB and this one 1.5 KiB, over the limit of 3 KiB; render less (fewer paths, or split them across Syncs), or raise the agent's --render-max-bytes"},
	}, {
		name: "objects larger than MaxBytes once built",
		files: map[string]string{
			"app/kustomization.yaml": "resources: [cms.yaml]\ncommonAnnotations:\n  note: " + strings.Repeat("n", 1000) + "\n",
			"app/cms.yaml":           configMap("a") + "---\n" + configMap("b") + "---\n" + configMap("c") + "---\n" + configMap("d") + "---\n" + configMap("e"),
		},
		paths:   []string{"app"},
		budgets: Budgets{MaxBytes: 4 << 10},
		want:    []string{"app/kustomization.yaml → app/cms.yaml: render budget exceeded: the documents decoded before this one hold 3.1 KiB and this one 1.0 KiB, over the limit of 4 KiB; render less (fewer paths, or split them across Syncs), or raise the agent's --render-max-bytes"},
	}, {
		name:    "more files than MaxFiles, each file a kustomization reads counted once",
		files:   twice,
		paths:   []string{"app"},
		budgets: Budgets{MaxFiles: 4},
		want:    []string{"app/kustomization.yaml: render budget exceeded: the paths hold more than 4 manifest files; render less (fewer paths, or split them across Syncs), or raise the agent's --render-max-files"},
	}, {
		name:    "exactly MaxFiles files",
		files:   twice,
		paths:   []string{"app"},
		budgets: Budgets{MaxFiles: 5},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := render(t, tt.files, Options{Paths: tt.paths, Budgets: tt.budgets})
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if objs != nil {
				t.Errorf("got %d objects, want none", len(objs))
			}
			if !errors.Is(err, ErrOverBudget) {
				t.Errorf("error does not wrap ErrOverBudget: %v", err)
			}
			if diff := cmp.Diff(tt.want, messages(err)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderStopsAliasBombsInKustomizationsBeforeExpandingThem(t *testing.T) {
	root := checkout(t, map[string]string{
		"app/kustomization.yaml": "resources: [bomb.yaml]\n",
		"app/bomb.yaml":          laughs(9),
	})
	var objs []Object
	var err error
	heap := allocated(func() { objs, err = Render(Options{Root: root, Paths: []string{"app"}, Scope: cluster}) })
	if objs != nil {
		t.Errorf("got %d objects, want none", len(objs))
	}
	want := []string{"app/kustomization.yaml: app/bomb.yaml:1 (document 0): render budget exceeded: expanding the YAML aliases of this document would take more than the 64 MiB left of the limit of 64 MiB on decoded documents; repeat large values through aliases less often; render less (fewer paths, or split them across Syncs), or raise the agent's --render-max-bytes"}
	if diff := cmp.Diff(want, messages(err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if limit := uint64(64 << 20); heap > limit {
		t.Errorf("render allocated %s, want at most %s", formatBytes(int64(heap)), formatBytes(int64(limit)))
	}
}

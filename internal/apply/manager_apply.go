package apply

import (
	"context"
	"fmt"

	"github.com/driftless/driftless/internal/plan"
)

// Apply validates every object of p with a server-side dry-run and, when
// all pass, applies those that differ from the cluster, wave by wave.
// Within a wave, its CRDs and Namespaces are written first; then its
// cluster-wide policies; then everything else, kind by kind within each
// namespace (an object waits for every object of a lower rank in its
// namespace, not for other namespaces); then its webhooks and APIServices.
//
// Objects equal to the cluster are not written (their resourceVersion does
// not change). Objects that can only be validated once a Namespace or CRD
// of the same plan exists are validated after those are applied and before
// anything else of their wave is; if they fail, Apply returns a
// *ValidationError listing what was written. After each wave but the last
// (and after the last with Options.Wait.Last) Apply waits until the wave
// is healthy; an unhealthy wave stops it with an *UnhealthyError. A
// failure while writing starts nothing more (nothing of a later rank in
// the failed object's namespace is written): what was in flight is
// finished. Either way the ChangeSet so far is returned with the error.
func (m *Manager) Apply(ctx context.Context, p plan.Plan) (ChangeSet, error) {
	m.fresh = nil // Namespaces an earlier Apply created are not empty now
	newNamespaces, newKinds := prerequisites(len(p.Apply), func(i int) *plan.Step { return &p.Apply[i] })

	results := m.dryRunAll(ctx, p.Apply, newNamespaces, newKinds)
	if err := validationErrors(results, nil); err != nil {
		return nil, err
	}
	if m.opts.DryRun {
		return m.report(results), nil
	}
	if m.opts.BeforeWrite != nil {
		if err := m.opts.BeforeWrite(ctx); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotPrepared, err)
		}
	}
	var cs ChangeSet
	waves := p.Waves()
	offset := 0
	for wi, wave := range waves {
		group := results[offset : offset+len(wave)]
		offset += len(wave)
		waveStart := len(cs)
		// CRDs and Namespaces first, so that what lives in them can be
		// validated before it is written.
		n := 0
		for n < len(group) && group[n].step.Rank < plan.RankClusterPolicy {
			n++
		}
		done, err := m.write(ctx, group[:n])
		cs = append(cs, done...)
		if err != nil {
			return cs, err
		}
		if err := m.waitForCRDs(ctx, done); err != nil {
			return cs, err
		}
		for _, c := range done {
			if c.ID.Kind == "Namespace" && c.ID.Group == "" && c.Action == Created {
				if m.fresh == nil {
					m.fresh = map[string]bool{}
				}
				m.fresh[c.ID.Name] = true
			}
		}
		if err := m.recheck(ctx, results[offset-len(wave)+n:], cs); err != nil {
			return cs, err
		}
		for _, stage := range stages(group[n:]) {
			done, err := m.write(ctx, stage)
			cs = append(cs, done...)
			if err != nil {
				return cs, err
			}
		}
		w := Wave{Number: wave[0].Wave, Index: wi, Count: len(waves), Steps: wave, Changes: cs[waveStart:], SoFar: cs}
		if !w.Last() || m.opts.Wait.Last {
			if err := m.waitWave(ctx, w); err != nil {
				return cs, err
			}
		}
	}
	return cs, nil
}

// Wave is a wave just written, as Apply waits for it.
type Wave struct {
	// Number is the wave's driftless.dev/wave value; Index and Count its
	// place among the plan's waves.
	Number, Index, Count int
	Steps                []plan.Step
	// Changes are what was done to the wave's objects; SoFar to every
	// object of this and earlier waves.
	Changes, SoFar ChangeSet
}

// Last reports whether this is the plan's last wave.
func (w Wave) Last() bool { return w.Index == w.Count-1 }

// stages splits the results of one wave, past its CRDs and Namespaces,
// where a write must wait for everything before it: cluster-wide policy
// (quotas, limit ranges, classes) that admission of the rest consults,
// then everything else, then the webhooks and APIServices that will
// intercept requests once written.
func stages(results []checked) [][]checked {
	var out [][]checked
	for start := 0; start < len(results); {
		end := start + 1
		for end < len(results) && stageOf(results[end].step.Rank) == stageOf(results[start].step.Rank) {
			end++
		}
		out = append(out, results[start:end])
		start = end
	}
	return out
}

func stageOf(r plan.Rank) int {
	switch {
	case r < plan.RankClusterPolicy:
		return 0
	case r == plan.RankClusterPolicy:
		return 1
	case r < plan.RankWebhook:
		return 2
	}
	return 3
}

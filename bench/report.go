package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// printReport writes the Markdown table of a run, then the summary line.
func printReport(out io.Writer, res *results) {
	fmt.Fprintf(out, "driftless bench, %s profile, commit %s%s, %s, %d CPUs, %s\n\n",
		res.Profile, res.Commit, map[bool]string{true: " (uncommitted changes)", false: ""}[res.Dirty], res.Go, res.CPUs, res.Date.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintln(out, "| objects | measurement | median | spread | target |")
	fmt.Fprintln(out, "| ---: | --- | ---: | --- | --- |")
	row := func(objects, what, value, spread, target string) {
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s |\n", objects, what, value, spread, target)
	}
	for _, s := range res.Sizes {
		n := thousands(s.Objects)
		fs := s.FirstSync
		row(n, fmt.Sprintf("first sync: floor, raw server-side-apply loop, concurrency %d (tried %s)", fs.FloorConcurrency, sweep(fs.FloorSweep)),
			secs(fs.Floor.Median), spread(fs.Floor), "")
		row(n, "first sync: floor with a dry-run of every object before its batch is applied (the least a validate-first design costs)",
			fmt.Sprintf("%s (%.2f× floor)", secs(fs.Validated.Median), fs.ValidatedRatio), spread(fs.Validated), "")
		row(n, "first sync: `kubectl apply --server-side`", fmt.Sprintf("%s (%.2f× floor)", secs(fs.Kubectl.Median), fs.KubectlRatio), spread(fs.Kubectl), "")
		if fs.Failed != "" {
			row(n, "first sync: driftless, "+res.ClientLimits, "**did not finish**", strings.ReplaceAll(fs.Failed, "|", "/"), "≤ 1.1× validated floor")
		} else {
			row(n, fmt.Sprintf("first sync: driftless, %s; engine's own %s", res.ClientLimits, secs(fs.Engine.Median)),
				fmt.Sprintf("**%s (%.2f× floor, %.2f× validated floor)**", secs(fs.Driftless.Median), fs.Ratio, fs.Driftless.Median/fs.Validated.Median), spread(fs.Driftless), "≤ 1.1× validated floor")
		}
		if fs.Unthrottled != nil {
			row(n, "first sync: driftless, "+unthrottled.name, fmt.Sprintf("%s (%.2f× floor)", secs(fs.Unthrottled.Median), fs.UnthrottledRatio), spread(*fs.Unthrottled), "")
		}
		row(n, fmt.Sprintf("first sync: driftless's API requests (mean in flight %.1f; CPU %.1f s)", fs.InFlight, fs.AgentCPU),
			strconv.Itoa(fs.DriftlessOwn.Total), fs.DriftlessOwn.ByVerb, "")
		if fs.KeptLimits != res.ClientLimits {
			row(n, "**the rows below ran on an agent with "+fs.KeptLimits+"**, the only one that finishes a first sync at this size", "", "", "")
		}
		row(n, fmt.Sprintf("one-object change → applied, picked up at the next interval (%s)", secs(s.Change.Interval)),
			secs(s.Change.NextInterval.Median), spread(s.Change.NextInterval), "")
		row(n, fmt.Sprintf("one-object change → applied, synced at once (spec edit, as a webhook would); engine's own %s", secs(s.Change.Engine.Median)),
			secs(s.Change.Triggered.Median), spread(s.Change.Triggered), "≤ 2 s")
		row(n, "one-object change: driftless's API requests", fmt.Sprintf("%d (%d writes)", s.Change.Requests.Total, s.Change.Requests.Writes), s.Change.Requests.ByVerb, "")
		if wh := s.Change.Webhook; len(wh.Applied.Samples) > 0 {
			row(n, fmt.Sprintf("commit pushed → signed GitHub push notice to the webhook receiver → applied; engine's own %s, receiver's reply %.0f ms (median)",
				secs(wh.Engine.Median), wh.Reply.Median*1000),
				fmt.Sprintf("**%s (%.2f× spec edit)**", secs(wh.Applied.Median), wh.OverTriggered), spread(wh.Applied), "≤ 2 s at 10,000")
			row(n, "commit pushed → push notice → the Sync Ready at the commit", secs(wh.Ready.Median), spread(wh.Ready), "")
			row(n, "push notice: driftless's API requests", fmt.Sprintf("%d (%d writes)", wh.Requests.Total, wh.Requests.Writes), wh.Requests.ByVerb, "")
		}
		st := s.Steady
		row(n, fmt.Sprintf("steady state, %d × %s intervals (%d syncs): driftless's API requests", st.Intervals, secs(s.Change.Interval), int(st.Syncs)),
			fmt.Sprintf("**%d (%d writes)**", st.Driftless.Total, st.Driftless.Writes), st.Driftless.ByVerb, "zero writes; no per-object requests")
		row(n, "steady state: API server requests from all clients (harness and loopback included)",
			strconv.Itoa(st.Server.Total), st.Server.ByVerb, "")
		row(n, "steady state: CPU of the agent's process (harness idle), per interval",
			fmt.Sprintf("%.3f s", st.CPU/float64(max(st.Intervals, 1))), fmt.Sprintf("git children %.3f s", st.ChildCPU/float64(max(st.Intervals, 1))), "")
		if d := s.Drift.Latency; d.N > 0 {
			row(n, fmt.Sprintf("drift revert after `kubectl edit`, %d edits: p50 / p90 / p99", d.N),
				fmt.Sprintf("**%.0f / %.0f / %.0f ms**", d.P50, d.P90, d.P99), fmt.Sprintf("%.0f–%.0f ms", d.Min, d.Max), "p50 ≤ 50 ms, p99 ≤ 500 ms at 10,000")
			row(n, "drift revert: driftless's API requests per revert", fmt.Sprintf("%.1f", s.Drift.RequestsPerRevert), s.Drift.Requests.ByVerb, "")
		} else {
			row(n, "drift revert after `kubectl edit`", "not run (-edits 0)", "", "")
		}
		m := s.Memory
		row(n, "memory of the process managing the objects: Go heap / RSS (harness included)",
			fmt.Sprintf("%.0f / %.0f MiB", m.Managed.HeapMiB, m.Managed.RSSMiB),
			fmt.Sprintf("agent idle %.0f / %.0f; harness alone %.0f / %.0f", m.Idle.HeapMiB, m.Idle.RSSMiB, m.Before.HeapMiB, m.Before.RSSMiB), "")
		if rs := s.Restart; rs != nil {
			row(n, fmt.Sprintf("restart over the objects in sync: start → serving (watches listed, Sync reconciled and Ready); cache synced %s", secs(rs.CacheSynced)),
				fmt.Sprintf("**%s (%.1f× one full LIST)**", secs(rs.Serving), rs.Ratio),
				fmt.Sprintf("LIST of the %s objects, one per kind: %.0f ms; requests until serving: %s", n, rs.List.Median*1000, rs.Requests.ByVerb), "")
			other := "none"
			if rs.OtherWrites > 0 {
				other = rs.OtherDetail
			}
			row(n, "restart: writes to managed objects until quiet (other writes apart)",
				fmt.Sprintf("**%d**", rs.ManagedWrites), "other: "+other, "0")
		}
	}
	if p := res.Memory10k; p != nil {
		row(thousands(p.Objects), fmt.Sprintf("memory, **extrapolated** linearly from %s: RSS (heap)", p.From),
			fmt.Sprintf("**%.0f MiB** (%.0f MiB)", p.RSSMiB, p.HeapMiB),
			fmt.Sprintf("+%.1f MiB RSS per 1,000 objects; without the harness ≈ %.0f MiB", p.RSSPerThousand, p.AgentRSSMiB), "≤ 150 MiB RSS")
	}
	if ov := res.Overlays; ov != nil {
		n := thousands(ov.Objects)
		row(n, fmt.Sprintf("%d Kustomize overlays of one base in one Sync: first sync, kustomizations built", ov.Apps),
			fmt.Sprintf("%s, %.0f built", secs(ov.First.Ready), ov.First.Built), "1 run", "")
		row(n, "one app's commit → Ready (spec-edit trigger): kustomizations built / reused",
			fmt.Sprintf("**%s, %.0f built** / %.0f reused", secs(ov.OneApp.Ready), ov.OneApp.Built, ov.OneApp.Reused),
			fmt.Sprintf("%.2f× the shared base's commit (%s, %.0f built) in the same run", ov.OneAppOverBase, secs(ov.SharedBase.Ready), ov.SharedBase.Built), "1 build")
	}
	if f := res.Fleet; f != nil {
		n := thousands(f.Objects)
		row(n, fmt.Sprintf("%d Syncs of 4 objects, one repository: all Ready after creating them", f.Syncs),
			fmt.Sprintf("**%s (%.2f×)**", secs(f.AllReady), f.PerFloor),
			fmt.Sprintf("× the validated floor over as many objects in the same run (%s); %d fetches, %d ls-remotes, %.0f renders, %s requests (%s), peak RSS %.0f MiB", secs(f.Floor), f.Fetches, f.LsRemotes, f.Renders, thousands(f.Requests.Total), f.Requests.ByVerb, f.PeakRSS), "≤ 30 s, 1 fetch")
		c := f.Change
		row(n, "one app's commit, push notice → that app applied / every Sync Ready at the commit",
			fmt.Sprintf("%s / %s", secs(c.Applied), secs(c.AllReady)),
			fmt.Sprintf("woke %d; %d fetches, %d ls-remotes, %.0f renders, %d writes", c.Woken, c.Fetches, c.LsRemotes, c.Renders, c.Writes), "1 render")
	}
	if r := res.Remote; r != nil {
		row(thousands(4*r.Clusters*r.SyncsPerCluster), fmt.Sprintf("%d remote clusters (kubeconfig Secrets, each its own token, over %d control planes) × %d Syncs of 4 objects: all Ready after creating them", r.Clusters, r.Planes, r.SyncsPerCluster),
			fmt.Sprintf("**%s (%.2f×)**", secs(r.Remote.AllReady), r.ReadyRatio),
			fmt.Sprintf("× %d Syncs of the agent's cluster in the same run (%s); heap +%.1f MiB (%.2f× the baseline's +%.1f MiB, %.2f MiB per cluster above it); per cluster: %.0f requests served, %.0f watches open",
				r.Local.Syncs, secs(r.Local.AllReady), r.Remote.HeapGrowth, r.HeapRatio, r.Local.HeapGrowth, r.HeapPerCluster, r.RequestsPerCluster, r.WatchesPerCluster), "")
	}
	if a := res.Admission; a != nil {
		row("1", fmt.Sprintf("a merge patch of a managed object, admission webhook registered / unregistered, %d writes each in %d alternating rounds: p50", a.With.N, a.Rounds),
			fmt.Sprintf("**%.1f / %.1f ms (%.2f×)**", a.With.P50, a.Without.P50, a.RatioP50),
			fmt.Sprintf("p99 %.1f / %.1f ms (%.2f×)", a.With.P99, a.Without.P99, a.RatioP99), "")
	}
	for _, m := range res.AgentMemory {
		per := fmt.Sprintf("per 1,000 objects above idle: peak +%.1f, steady +%.1f MiB", m.PeakPerThousand, m.SteadyPerThousand)
		if m.Syncs > 1 {
			per += fmt.Sprintf("; per Sync: peak +%.3f, steady +%.3f MiB", m.PeakPerSync, m.SteadyPerSync)
		}
		row(thousands(m.Objects), fmt.Sprintf("the agent binary alone, %d Sync(s) (%s), Ready in %s (%s of the agent's CPU): RSS peak over its first syncs (VmHWM) / steady, after the next GC (idle %.0f MiB; %.0f MiB once quiet, before that GC; steady: %.0f MiB file-backed, Go heap %.0f MiB, %.0f MiB of it live)",
			m.Syncs, m.Shape, secs(m.AllReady), secs(m.ReadyCPU), m.IdleMiB, m.QuietMiB, m.SteadyFileMiB, m.SteadyHeapMiB, m.SteadyLiveMiB),
			fmt.Sprintf("**%.0f / %.0f MiB**", m.PeakMiB, m.SteadyMiB), per, "≤ 150 MiB at 10,000")
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, res.Summary)
}

// summary is the one-line summary: the first-sync ratios, revert p50,
// steady-state writes and restart from the 1,000-object size (else the
// largest), the fleet case, the revert p99 of a size of 10,000 objects or
// more, and the peak RSS of the agent process on one Sync of 10,000
// objects or more (measured, not the harness's process), and the sharded
// fleet of 10,000 Syncs or more (time to all Ready, the agents' peak RSS
// added up); n/a where the run did not cover it.
func summary(res *results) string {
	fleet := "n/a"
	if res.Fleet != nil {
		fleet = fmt.Sprintf("%.1fs", res.Fleet.AllReady)
	}
	rss := "n/a"
	if m, ok := agentMemoryAt(res, 10000); ok {
		rss = fmt.Sprintf("%.0fMiB", m.PeakMiB)
	}
	shards, shardsRSS := "n/a", "n/a"
	if sh := res.Shards; sh != nil && sh.Syncs >= 10000 {
		shards, shardsRSS = fmt.Sprintf("%.0fs", sh.AllReady), fmt.Sprintf("%.0fMiB", sh.PeakMiB)
	}
	if len(res.Sizes) == 0 {
		return fmt.Sprintf("summary: first-sync/floor=n/a first-sync/validated=n/a revert-p50=n/a steady-writes=n/a syncs-1000=%s rss-10k=%s revert-p99-10k=n/a restart/list=n/a shards-10k=%s shards-rss=%s",
			fleet, rss, shards, shardsRSS)
	}
	s := res.Sizes[len(res.Sizes)-1]
	for _, c := range res.Sizes {
		if c.Apps == 250 {
			s = c
		}
	}
	ratio, validated := "failed", "failed"
	if s.FirstSync.Failed == "" {
		ratio = fmt.Sprintf("%.2f", s.FirstSync.Ratio)
		validated = fmt.Sprintf("%.2f", s.FirstSync.Driftless.Median/s.FirstSync.Validated.Median)
	}
	p99 := "n/a"
	for _, c := range res.Sizes {
		if c.Apps >= 2500 {
			p99 = fmt.Sprintf("%.0fms", c.Drift.Latency.P99)
		}
	}
	restart := "n/a"
	if s.Restart != nil {
		restart = fmt.Sprintf("%.1f", s.Restart.Ratio)
	}
	return fmt.Sprintf("summary: first-sync/floor=%s first-sync/validated=%s revert-p50=%.0fms steady-writes=%d syncs-1000=%s rss-10k=%s revert-p99-10k=%s restart/list=%s shards-10k=%s shards-rss=%s",
		ratio, validated, s.Drift.Latency.P50, s.Steady.Driftless.Writes, fleet, rss, p99, restart, shards, shardsRSS)
}

// agentMemoryAt returns the agent process's memory on one Sync of
// objects or more.
func agentMemoryAt(res *results, objects int) (agentMemory, bool) {
	for _, m := range res.AgentMemory {
		if m.Syncs == 1 && m.Objects >= objects {
			return m, true
		}
	}
	return agentMemory{}, false
}

func secs(s float64) string {
	switch {
	case s >= 10:
		return fmt.Sprintf("%.1f s", s)
	default:
		return fmt.Sprintf("%.2f s", s)
	}
}

func spread(t timing) string {
	if len(t.Samples) < 2 {
		return "1 run"
	}
	return fmt.Sprintf("%s–%s (%d runs)", strings.TrimSuffix(secs(t.Min), " s"), secs(t.Max), len(t.Samples))
}

func sweep(m map[string]float64) string {
	keys := make([]int, 0, len(m))
	for k := range m {
		n, _ := strconv.Atoi(k)
		keys = append(keys, n)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d: %s", k, secs(m[strconv.Itoa(k)]))
	}
	return strings.Join(parts, ", ")
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

package main

import (
	"testing"
	"time"
)

func TestSummaryLine(t *testing.T) {
	size := func(objects int, restartRatio float64) sizeResult {
		s := sizeResult{Objects: objects, Apps: objects / 4}
		s.FirstSync.Floor.add(time.Second)
		s.FirstSync.Validated.add(2 * time.Second)
		s.FirstSync.Driftless.add(3 * time.Second)
		s.FirstSync.Ratio = 3
		s.Drift.Latency = distribution{P50: float64(objects) / 100, P99: float64(objects) / 10}
		s.Memory.Managed = memory{RSSMiB: float64(objects) / 50}
		if restartRatio > 0 {
			s.Restart = &restart{Ratio: restartRatio}
		}
		return s
	}
	fleet := &fleet{AllReady: 53.44}
	tests := []struct {
		name string
		res  results
		want string
	}{
		{
			name: "the quick profile has no 10,000-object figures",
			res:  results{Sizes: []sizeResult{size(1000, 38.8)}, Fleet: fleet},
			want: "summary: first-sync/floor=3.00 first-sync/validated=1.50 revert-p50=10ms steady-writes=0 syncs-1000=53.4s rss-10k=n/a revert-p99-10k=n/a restart/list=38.8 shards-10k=n/a shards-rss=n/a",
		},
		{
			name: "the 10,000-object figures come from that size, the others from 1,000",
			res: results{Sizes: []sizeResult{size(100, 0), size(1000, 28.4), size(10000, 33.7)},
				AgentMemory: []agentMemory{{Syncs: 1, Objects: 10100, PeakMiB: 131.4, SteadyMiB: 97}, {Syncs: 1000, Objects: 10000, PeakMiB: 140}}},
			want: "summary: first-sync/floor=3.00 first-sync/validated=1.50 revert-p50=10ms steady-writes=0 syncs-1000=n/a rss-10k=131MiB revert-p99-10k=1000ms restart/list=28.4 shards-10k=n/a shards-rss=n/a",
		},
		{
			name: "the memory is the agent process's, never the harness's: without it rss-10k is n/a",
			res:  results{Sizes: []sizeResult{size(10000, 33.7)}},
			want: "summary: first-sync/floor=3.00 first-sync/validated=1.50 revert-p50=100ms steady-writes=0 syncs-1000=n/a rss-10k=n/a revert-p99-10k=1000ms restart/list=33.7 shards-10k=n/a shards-rss=n/a",
		},
		{
			name: "a run without the restart says n/a for it",
			res:  results{Sizes: []sizeResult{size(1000, 0)}},
			want: "summary: first-sync/floor=3.00 first-sync/validated=1.50 revert-p50=10ms steady-writes=0 syncs-1000=n/a rss-10k=n/a revert-p99-10k=n/a restart/list=n/a shards-10k=n/a shards-rss=n/a",
		},
		{
			name: "the sharded fleet counts only at 10,000 Syncs: time to all Ready and the agents' peak RSS added up",
			res:  results{Fleet: fleet, Shards: &shardsRun{Shards: 4, Syncs: 10000, AllReady: 281.2, PeakMiB: 512.6}},
			want: "summary: first-sync/floor=n/a first-sync/validated=n/a revert-p50=n/a steady-writes=n/a syncs-1000=53.4s rss-10k=n/a revert-p99-10k=n/a restart/list=n/a shards-10k=281s shards-rss=513MiB",
		},
		{
			name: "a sharded fleet below 10,000 Syncs is not the target's",
			res:  results{Shards: &shardsRun{Shards: 4, Syncs: 400, AllReady: 20, PeakMiB: 300}},
			want: "summary: first-sync/floor=n/a first-sync/validated=n/a revert-p50=n/a steady-writes=n/a syncs-1000=n/a rss-10k=n/a revert-p99-10k=n/a restart/list=n/a shards-10k=n/a shards-rss=n/a",
		},
		{
			name: "a fleet-only run has every size figure n/a",
			res:  results{Fleet: fleet},
			want: "summary: first-sync/floor=n/a first-sync/validated=n/a revert-p50=n/a steady-writes=n/a syncs-1000=53.4s rss-10k=n/a revert-p99-10k=n/a restart/list=n/a shards-10k=n/a shards-rss=n/a",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := summary(&tt.res); got != tt.want {
				t.Errorf("summary is\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

package main

import "fmt"

// memResult is the process's memory around the kept agent. The agent runs
// in the harness's process, so every reading includes the harness; Before
// (the harness alone, just before the agent starts) bounds that share.
type memResult struct {
	Before  memory `json:"harness_before_agent"`
	Idle    memory `json:"agent_started_no_objects"`
	Managed memory `json:"agent_managing_objects"`
}

// projection extrapolates memory linearly to more objects.
type projection struct {
	Objects int    `json:"objects"`
	From    string `json:"from"`
	// RSSMiB and HeapMiB are the whole process (an upper bound for the
	// agent alone); AgentRSSMiB subtracts the harness's RSS before the agent
	// started (a lower bound).
	RSSMiB      float64 `json:"rss_mib"`
	HeapMiB     float64 `json:"heap_mib"`
	AgentRSSMiB float64 `json:"agent_rss_mib"`
	// PerThousand is the growth per 1,000 managed objects.
	RSSPerThousand  float64 `json:"rss_mib_per_1000_objects"`
	HeapPerThousand float64 `json:"heap_mib_per_1000_objects"`
}

// project fits a line through the two largest sizes measured, or, with
// one size, through the agent with no objects and that size.
func project(sizes []sizeResult, objects int) *projection {
	if len(sizes) == 0 {
		return nil
	}
	last := sizes[len(sizes)-1]
	x1, y1 := float64(last.Objects), last.Memory.Managed
	x0, y0, from := 0.0, last.Memory.Idle, fmt.Sprintf("the agent with no objects and with %d", last.Objects)
	if len(sizes) >= 2 {
		prev := sizes[len(sizes)-2]
		x0, y0 = float64(prev.Objects), prev.Memory.Managed
		from = fmt.Sprintf("%d and %d objects", prev.Objects, last.Objects)
	}
	rssSlope := (y1.RSSMiB - y0.RSSMiB) / (x1 - x0)
	heapSlope := (y1.HeapMiB - y0.HeapMiB) / (x1 - x0)
	p := &projection{
		Objects:         objects,
		From:            from,
		RSSMiB:          y1.RSSMiB + rssSlope*(float64(objects)-x1),
		HeapMiB:         y1.HeapMiB + heapSlope*(float64(objects)-x1),
		RSSPerThousand:  rssSlope * 1000,
		HeapPerThousand: heapSlope * 1000,
	}
	p.AgentRSSMiB = p.RSSMiB - last.Memory.Before.RSSMiB
	return p
}

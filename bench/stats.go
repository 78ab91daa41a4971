package main

import (
	"math"
	"slices"
	"time"
)

// timing is a repeated measurement in seconds: its samples, median and
// spread.
type timing struct {
	Samples []float64 `json:"samples"`
	Median  float64   `json:"median"`
	Min     float64   `json:"min"`
	Max     float64   `json:"max"`
}

func (t *timing) add(d time.Duration) {
	t.Samples = append(t.Samples, d.Seconds())
	s := slices.Clone(t.Samples)
	slices.Sort(s)
	t.Min, t.Max, t.Median = s[0], s[len(s)-1], median(s)
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// distribution is a latency distribution in milliseconds.
type distribution struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Min float64 `json:"min_ms"`
	Max float64 `json:"max_ms"`
}

func distributionOf(ds []time.Duration) distribution {
	ms := make([]float64, len(ds))
	for i, d := range ds {
		ms[i] = float64(d.Microseconds()) / 1000
	}
	slices.Sort(ms)
	if len(ms) == 0 {
		return distribution{}
	}
	return distribution{N: len(ms), P50: percentile(ms, 50), P90: percentile(ms, 90), P99: percentile(ms, 99), Min: ms[0], Max: ms[len(ms)-1]}
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []float64, p float64) float64 {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank-1, 0)]
}

package monitoring_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// PromQL, taken apart with regular expressions: the Prometheus parser is
// not in the module graph. What is left after removing strings, label
// matchers, groupings, ranges, offsets, Grafana variables and numbers is
// metric names, function names (followed by "(") and keywords.
var (
	stringLiteral = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	matchers      = regexp.MustCompile(`\{[^}]*\}`)
	grouping      = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	rangeOrSubq   = regexp.MustCompile(`\[[^\]]*\]`)
	offset        = regexp.MustCompile(`\boffset\s+-?[0-9a-z]+`)
	grafanaVar    = regexp.MustCompile(`\$\{?\w+\}?`)
	number        = regexp.MustCompile(`\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b`)
	identifier    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(?:\s*\()?`)
	labelValues   = regexp.MustCompile(`^\s*label_values\(\s*(?:(.+),)?\s*\w+\s*\)\s*$`)
	keywords      = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "inf": true, "nan": true}
)

// metricNames returns the metric names an expression reads, sorted, once
// each. A Grafana label_values(metric, label) query reads metric.
func metricNames(expr string) []string {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		expr = m[1]
	}
	for _, re := range []*regexp.Regexp{stringLiteral, matchers, grouping, rangeOrSubq, offset, grafanaVar, number} {
		expr = re.ReplaceAllString(expr, " ")
	}
	var names []string
	for _, id := range identifier.FindAllString(expr, -1) {
		if strings.HasSuffix(id, "(") || keywords[strings.ToLower(id)] {
			continue
		}
		if !slices.Contains(names, id) {
			names = append(names, id)
		}
	}
	slices.Sort(names)
	return names
}

func TestMetricNamesFindsEveryMetricOfAnExpression(t *testing.T) {
	for _, tc := range []struct {
		name, expr string
		want       []string
	}{
		{"a selector with matchers", `driftless_sync_ready{sync=~"$sync",suspended="false"} == 0`, []string{"driftless_sync_ready"}},
		{"functions, groupings and ranges", `histogram_quantile(0.95, sum by (le) (rate(driftless_sync_duration_seconds_bucket{sync=~"$sync"}[$__rate_interval])))`,
			[]string{"driftless_sync_duration_seconds_bucket"}},
		{"binary operators, offsets and keywords", "sum by (sync) (increase(a_total[15m]) or (a_total unless b_total offset 15m)) > bool 0",
			[]string{"a_total", "b_total"}},
		{"a string that looks like a metric", `label_replace(up, "x", "not_a_metric", "job", "(.*)")`, []string{"up"}},
		{"a Grafana label_values query", "label_values(driftless_sync_ready, sync)", []string{"driftless_sync_ready"}},
		{"vector and numbers", "count(x == 1) or vector(0) * 1e3", []string{"x"}},
		{"on and group_left", `a * on (pod) group_left (node) b{job="j"}`, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, metricNames(tc.expr)); diff != "" {
				t.Errorf("metricNames(%q) (-want +got):\n%s", tc.expr, diff)
			}
		})
	}
}

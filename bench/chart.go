package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// series is one line of a chart: a name and its points (objects, value).
type series struct {
	name   string
	color  string
	dashed bool
	points [][2]float64
}

// panel is one plot: a title, the y axis's label and its lines.
type panel struct {
	title, yLabel string
	lines         []series
}

// chartPanels are the results as plots against objects: first sync time
// of driftless and its baselines (and a restarted agent's time to serving,
// when measured), and the memory of the process that ran the agent and,
// when measured, of the agent binary alone (the floors' and kubectl's
// memory is not measured).
func chartPanels(res *results) []panel {
	timeLines := []series{
		{name: "driftless (Sync created → Ready)", color: "#1f77b4"},
		{name: "raw floor (server-side-apply loop)", color: "#2ca02c", dashed: true},
		{name: "validated floor (dry-run, then apply)", color: "#9467bd", dashed: true},
		{name: "kubectl apply --server-side", color: "#ff7f0e"},
	}
	memLines := []series{
		{name: "driftless: RSS managing the objects (harness included)", color: "#1f77b4"},
		{name: "driftless: Go heap managing the objects", color: "#17becf"},
		{name: "harness alone, before the agent started (RSS)", color: "#7f7f7f", dashed: true},
	}
	for _, s := range res.Sizes {
		x, fs := float64(s.Objects), s.FirstSync
		if len(fs.Driftless.Samples) > 0 {
			timeLines[0].points = append(timeLines[0].points, [2]float64{x, fs.Driftless.Median})
		}
		timeLines[1].points = append(timeLines[1].points, [2]float64{x, fs.Floor.Median})
		timeLines[2].points = append(timeLines[2].points, [2]float64{x, fs.Validated.Median})
		timeLines[3].points = append(timeLines[3].points, [2]float64{x, fs.Kubectl.Median})
		m := s.Memory
		memLines[0].points = append(memLines[0].points, [2]float64{x, m.Managed.RSSMiB})
		memLines[1].points = append(memLines[1].points, [2]float64{x, m.Managed.HeapMiB})
		memLines[2].points = append(memLines[2].points, [2]float64{x, m.Before.RSSMiB})
	}
	peak := series{name: "the agent binary alone, one Sync: peak RSS (VmHWM)", color: "#d62728"}
	steady := series{name: "the agent binary alone, one Sync: steady RSS", color: "#d62728", dashed: true}
	for _, m := range res.AgentMemory {
		if m.Syncs == 1 {
			peak.points = append(peak.points, [2]float64{float64(m.Objects), m.PeakMiB})
			steady.points = append(steady.points, [2]float64{float64(m.Objects), m.SteadyMiB})
		}
	}
	if len(peak.points) > 0 {
		memLines = append(memLines, peak, steady)
	}
	restart := series{name: "driftless restarted over the objects in sync → serving", color: "#1f77b4", dashed: true}
	for _, s := range res.Sizes {
		if s.Restart != nil {
			restart.points = append(restart.points, [2]float64{float64(s.Objects), s.Restart.Serving})
		}
	}
	if len(restart.points) > 0 {
		timeLines = append(timeLines, restart)
	}
	return []panel{
		{title: "First sync (and restart): time against objects", yLabel: "seconds (median)", lines: timeLines},
		{title: "Memory against objects", yLabel: "MiB", lines: memLines},
	}
}

// Chart geometry, in SVG user units.
const (
	panelWidth  = 520.0
	panelHeight = 420.0
	plotLeft    = 70.0  // left of the plot inside a panel
	plotTop     = 40.0  // top of the plot inside a panel
	plotWidth   = 420.0 // width of the plot
	plotHeight  = 250.0 // height of the plot
	legendTop   = 352.0 // first legend line inside a panel
)

// writeChart writes the results as a hand-written SVG: one panel per plot,
// objects on a log-scale x axis, one polyline (with a marker per point)
// per series.
func writeChart(w io.Writer, res *results) error {
	panels := chartPanels(res)
	var xs []float64
	for _, s := range res.Sizes {
		xs = append(xs, float64(s.Objects))
	}
	if len(xs) == 0 {
		return fmt.Errorf("no sizes to chart")
	}
	lo, hi := slices.Min(xs)/1.5, slices.Max(xs)*1.5
	var b bytes.Buffer
	width := panelWidth * float64(len(panels))
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n",
		width, panelHeight+30, width, panelHeight+30)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="%.0f" font-size="11" fill="#555">%s</text>`+"\n", panelHeight+20,
		esc(fmt.Sprintf("driftless bench, %s profile, commit %s, %d CPUs, %s", res.Profile, res.Commit, res.CPUs, res.Date.Format("2006-01-02 15:04 UTC"))))
	for i, p := range panels {
		fmt.Fprintf(&b, `<g transform="translate(%.0f,0)">`+"\n", float64(i)*panelWidth)
		writePanel(&b, p, lo, hi)
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

func writePanel(b *bytes.Buffer, p panel, lo, hi float64) {
	yMax := 0.0
	for _, l := range p.lines {
		for _, pt := range l.points {
			yMax = math.Max(yMax, pt[1])
		}
	}
	step := niceStep(yMax / 5)
	yTop := math.Max(step, math.Ceil(yMax/step)*step)
	x := func(v float64) float64 {
		return plotLeft + (math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*plotWidth
	}
	y := func(v float64) float64 { return plotTop + plotHeight - v/yTop*plotHeight }

	fmt.Fprintf(b, `<text x="%.0f" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", plotLeft, esc(p.title))
	// Axes.
	fmt.Fprintf(b, `<line class="axis" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", plotLeft, plotTop+plotHeight, plotLeft+plotWidth, plotTop+plotHeight)
	fmt.Fprintf(b, `<line class="axis" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", plotLeft, plotTop, plotLeft, plotTop+plotHeight)
	fmt.Fprintf(b, `<text class="axis-label" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", plotLeft+plotWidth/2, plotTop+plotHeight+38, esc("objects (log scale)"))
	fmt.Fprintf(b, `<text class="axis-label" x="18" y="%.1f" text-anchor="middle" transform="rotate(-90 18 %.1f)">%s</text>`+"\n", plotTop+plotHeight/2, plotTop+plotHeight/2, esc(p.yLabel))
	// Ticks: powers of ten and 1-2-5 steps between them on x, even steps on y.
	for d := math.Pow(10, math.Floor(math.Log10(lo))); d <= hi; d *= 10 {
		for _, m := range []float64{1, 2, 5} {
			v := d * m
			if v < lo || v > hi {
				continue
			}
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x(v), plotTop, x(v), plotTop+plotHeight)
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x(v), plotTop+plotHeight+16, thousands(int(v)))
		}
	}
	for v := 0.0; v <= yTop+step/2; v += step {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", plotLeft, y(v), plotLeft+plotWidth, y(v))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", plotLeft-6, y(v)+4, tick(v, step))
	}
	// One polyline per series, a circle per point, and a legend line.
	for i, l := range p.lines {
		dash := ""
		if l.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		pts := make([]string, len(l.points))
		for j, pt := range l.points {
			pts[j] = fmt.Sprintf("%.1f,%.1f", x(pt[0]), y(pt[1]))
		}
		fmt.Fprintf(b, `<polyline class="series" data-name="%s" points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n",
			esc(l.name), strings.Join(pts, " "), l.color, dash)
		for _, pt := range l.points {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s: %s objects, %s</title></circle>`+"\n",
				x(pt[0]), y(pt[1]), l.color, esc(l.name), thousands(int(pt[0])), tick(pt[1], step/100))
		}
		ly := legendTop + float64(i)*16
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="2"%s/>`+"\n", plotLeft, ly-4, plotLeft+24, ly-4, l.color, dash)
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f">%s</text>`+"\n", plotLeft+30, ly, esc(l.name))
	}
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// tick formats v with as many decimals as step needs.
func tick(v, step float64) string {
	decimals := max(0, int(math.Ceil(-math.Log10(step))))
	return fmt.Sprintf("%.*f", decimals, v)
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}

// chartFrom renders the chart of a results JSON next to it (name.svg).
func chartFrom(name string) (string, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return "", err
	}
	var res results
	if err := json.Unmarshal(data, &res); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	out := strings.TrimSuffix(name, ".json") + ".svg"
	var b bytes.Buffer
	if err := writeChart(&b, &res); err != nil {
		return "", fmt.Errorf("chart of %s: %w", name, err)
	}
	return out, os.WriteFile(out, b.Bytes(), 0o644)
}

package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// chartElement is what the test reads back from the SVG.
type chartElement struct {
	name, class, dataName, points, text string
}

func TestChartIsWellFormedSVGWithOneLinePerSeriesAndLabelledAxes(t *testing.T) {
	size := func(objects int, driftless, floor, validated, kubectl, rss float64) sizeResult {
		s := sizeResult{Objects: objects, Apps: objects / 4}
		s.FirstSync.Driftless.add(time.Duration(driftless * float64(time.Second)))
		s.FirstSync.Floor.add(time.Duration(floor * float64(time.Second)))
		s.FirstSync.Validated.add(time.Duration(validated * float64(time.Second)))
		s.FirstSync.Kubectl.add(time.Duration(kubectl * float64(time.Second)))
		s.Memory.Managed = memory{RSSMiB: rss, HeapMiB: rss / 2}
		s.Memory.Before = memory{RSSMiB: 60, HeapMiB: 20}
		s.Restart = &restart{Serving: driftless / 2}
		return s
	}
	res := &results{
		Date: time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC), Commit: "abc1234", Profile: "full", CPUs: 2,
		Sizes: []sizeResult{
			size(101, 0.5, 0.3, 0.4, 0.6, 80),
			size(1010, 3.6, 1.4, 2.2, 3.9, 110),
			size(10100, 40, 14, 22, 41, 190),
		},
	}
	var out bytes.Buffer
	if err := writeChart(&out, res); err != nil {
		t.Fatal(err)
	}

	var elements []chartElement
	dec := xml.NewDecoder(&out)
	var open *chartElement
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := chartElement{name: tok.Name.Local}
			for _, a := range tok.Attr {
				switch a.Name.Local {
				case "class":
					e.class = a.Value
				case "data-name":
					e.dataName = a.Value
				case "points":
					e.points = a.Value
				}
			}
			elements = append(elements, e)
			open = &elements[len(elements)-1]
		case xml.CharData:
			if open != nil {
				open.text += string(tok)
			}
		case xml.EndElement:
			open = nil
		}
	}
	if elements[0].name != "svg" {
		t.Errorf("the root element is <%s>, want <svg>", elements[0].name)
	}

	var series, labels []string
	for _, e := range elements {
		switch e.class {
		case "series":
			series = append(series, e.dataName)
			if n := len(strings.Fields(e.points)); n != len(res.Sizes) {
				t.Errorf("the line of %q has %d points, want one per size (%d)", e.dataName, n, len(res.Sizes))
			}
		case "axis-label":
			labels = append(labels, e.text)
		}
	}
	want := []string{
		"driftless (Sync created → Ready)", "raw floor (server-side-apply loop)",
		"validated floor (dry-run, then apply)", "kubectl apply --server-side",
		"driftless restarted over the objects in sync → serving",
		"driftless: RSS managing the objects (harness included)", "driftless: Go heap managing the objects",
		"harness alone, before the agent started (RSS)",
	}
	if strings.Join(series, "\n") != strings.Join(want, "\n") {
		t.Errorf("the chart's lines are\n%s\nwant one per series:\n%s", strings.Join(series, "\n"), strings.Join(want, "\n"))
	}
	for _, label := range []string{"objects (log scale)", "seconds (median)", "MiB"} {
		found := false
		for _, l := range labels {
			found = found || l == label
		}
		if !found {
			t.Errorf("no axis is labelled %q (axis labels: %q)", label, labels)
		}
	}
}

func TestChartOfARunWithoutSizesIsAnError(t *testing.T) {
	if err := writeChart(io.Discard, &results{}); err == nil {
		t.Error("a run with no sizes gave a chart, want an error")
	}
}

func TestChartShowsTheAgentBinarysMeasuredMemoryAtItsSize(t *testing.T) {
	s := sizeResult{Objects: 10100, Apps: 2500}
	res := &results{Sizes: []sizeResult{s}, AgentMemory: []agentMemory{
		{Syncs: 1, Objects: 10100, PeakMiB: 140, SteadyMiB: 120},
		{Syncs: 1000, Objects: 10000, PeakMiB: 130, SteadyMiB: 125},
	}}
	got := map[string][][2]float64{}
	for _, l := range chartPanels(res)[1].lines {
		got[l.name] = l.points
	}
	for name, want := range map[string]float64{
		"the agent binary alone, one Sync: peak RSS (VmHWM)": 140,
		"the agent binary alone, one Sync: steady RSS":       120,
	} {
		if p := got[name]; len(p) != 1 || p[0] != [2]float64{10100, want} {
			t.Errorf("the memory panel's %q is %v, want one point at 10,100 objects, %.0f MiB", name, p, want)
		}
	}
}

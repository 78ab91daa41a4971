package ui

import (
	"html"
	"strings"
	"testing"
)

// FuzzEventIsOneEventWhateverTheText frames any text as a live event: the
// frame is one event (no CR, one empty line, at its end), made of its
// event field and data fields only, whose data reads back as the text.
func FuzzEventIsOneEventWhateverTheText(f *testing.F) {
	for _, seed := range []string{"<p>ok</p>", "a\r\rdata: x", "a\r\nb\n\nc", "\x00\x1b[31m\u2028\u0085", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		frame := event("update", text)
		if strings.ContainsRune(frame, '\r') {
			t.Fatalf("the frame of %q holds a CR: %q", text, frame)
		}
		body, ok := strings.CutSuffix(frame, "\n\n")
		if !ok || strings.Contains(body, "\n\n") {
			t.Fatalf("the frame of %q is not one event: %q", text, frame)
		}
		lines := strings.Split(body, "\n")
		if lines[0] != "event: update" {
			t.Fatalf("the frame of %q starts with %q", text, lines[0])
		}
		var data []string
		for _, l := range lines[1:] {
			d, ok := strings.CutPrefix(l, "data: ")
			if !ok {
				t.Fatalf("the frame of %q has a line that is not data: %q", text, l)
			}
			data = append(data, d)
		}
		// An HTML parser reads NUL as U+FFFD, raw or as a reference, and
		// so each byte that is not UTF-8 (as the frame writes it).
		want := html.UnescapeString(strings.ReplaceAll(string([]rune(text)), "\x00", "\uFFFD"))
		if got := html.UnescapeString(strings.Join(data, "\n")); got != want {
			t.Errorf("the data of the frame of %q reads back as %q", text, got)
		}
	})
}

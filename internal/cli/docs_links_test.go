package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestDocsLinksLeadSomewhere checks every relative link of README.md and
// docs/*.md: the file it names exists, and its #anchor is a heading of
// that file by GitHub's rules (see headingAnchors). Links to other sites
// are not followed.
func TestDocsLinksLeadSomewhere(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, file := range docFiles(t) {
		for _, problem := range brokenLinks(t, root, file) {
			t.Error(problem)
		}
	}
}

// brokenLinks returns a line for every link of file that leads nowhere,
// naming the file, its line and the link.
func brokenLinks(t *testing.T, root, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(root, file)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(name string) map[string]bool {
		if a, ok := anchors[name]; ok {
			return a
		}
		text, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		anchors[name] = headingAnchors(string(text))
		return anchors[name]
	}
	var problems []string
	for _, l := range markdownLinks(string(data)) {
		if hasScheme.MatchString(l.target) {
			continue
		}
		target, anchor, _ := strings.Cut(l.target, "#")
		at := fmt.Sprintf("%s:%d: link (%s)", filepath.ToSlash(rel), l.line, l.target)
		name := file
		if target != "" {
			name = filepath.Join(filepath.Dir(file), filepath.FromSlash(target))
			info, err := os.Stat(name)
			if err != nil {
				problems = append(problems, at+": "+filepath.ToSlash(target)+" does not exist")
				continue
			}
			if info.IsDir() || anchor == "" {
				continue
			}
		}
		if !strings.HasSuffix(name, ".md") {
			continue
		}
		if !anchorsOf(name)[anchor] {
			problems = append(problems, fmt.Sprintf("%s: no heading of %s has the anchor #%s", at, filepath.Base(name), anchor))
		}
	}
	return problems
}

var (
	hasScheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	// inlineLink is [text](target) or [text](target "title"); an image
	// ![alt](target) is one too.
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^()\s<>]*)>?(?:\s+"[^"]*")?\s*\)`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	heading    = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	textLink   = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

type link struct {
	line   int
	target string
}

// markdownLinks returns the inline links of a Markdown text, outside
// fenced code blocks and code spans.
func markdownLinks(text string) []link {
	var links []link
	forEachLine(text, func(n int, line string) {
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			links = append(links, link{line: n, target: m[1]})
		}
	})
	return links
}

// forEachLine calls fn with each line of text, numbered from 1, that is
// not in a fenced code block.
func forEachLine(text string, fn func(n int, line string)) {
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" ") == "" {
				fence = ""
			}
		case strings.HasPrefix(trimmed, "```"), strings.HasPrefix(trimmed, "~~~"):
			fence = trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, trimmed[:1]))]
		default:
			fn(i+1, line)
		}
	}
}

// headingAnchors returns the anchors GitHub gives the ATX headings of a
// Markdown text: the heading's text as rendered (links become their text,
// code spans lose their backticks), lowercased, without any character
// but letters, digits, spaces, hyphens and underscores, spaces turned into
// hyphens; a second heading with the same anchor gets "-1", a third "-2".
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	counts := map[string]int{}
	forEachLine(text, func(_ int, line string) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		slug := githubSlug(m[2])
		if n := counts[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		counts[slug]++
	})
	return anchors
}

func githubSlug(title string) string {
	title = textLink.ReplaceAllString(title, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestGitHubAnchors(t *testing.T) {
	text := "# Sync\n## 3. The agent\n### `spec.chart` and [links](x.md)\n" +
		"```sh\n# not a heading\n```\n## Limits\n## Limits\n## Limits\n## What's new — café_1 ##\n"
	got := headingAnchors(text)
	for _, want := range []string{"sync", "3-the-agent", "specchart-and-links", "limits", "limits-1", "limits-2", "whats-new--café_1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a comment in a code block became a heading")
	}
}

package policy

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/driftless/driftless/api/v1alpha1"
)

// Policy is an ImagePolicy's spec, compiled: its regular expressions and
// range parsed once.
type Policy struct {
	semver    *semver.Constraints
	numerical bool
	desc      bool
	filter    *regexp.Regexp
	extract   string
	exclude   []*regexp.Regexp
}

// Compile checks spec and compiles it. Its error names the field at fault.
func Compile(spec v1alpha1.ImagePolicySpec) (*Policy, error) {
	p := &Policy{}
	choice := spec.Policy
	n := 0
	if choice.SemVer != nil {
		n++
		c, err := semver.NewConstraint(choice.SemVer.Range)
		if err != nil {
			return nil, fmt.Errorf("spec.policy.semver.range %q is not a semver range: %w", choice.SemVer.Range, err)
		}
		p.semver = c
	}
	if choice.Alphabetical != nil {
		n++
		p.desc = choice.Alphabetical.Order == v1alpha1.OrderDesc
	}
	if choice.Numerical != nil {
		n++
		p.numerical = true
		p.desc = choice.Numerical.Order == v1alpha1.OrderDesc
	}
	if n != 1 {
		return nil, fmt.Errorf("spec.policy must set exactly one of semver, alphabetical or numerical, found %d", n)
	}
	if f := spec.FilterTags; f != nil {
		re, err := regexp.Compile(f.Pattern)
		if err != nil {
			return nil, fmt.Errorf("spec.filterTags.pattern %q: %w", f.Pattern, err)
		}
		p.filter, p.extract = re, f.Extract
	}
	for i, e := range spec.Exclude {
		re, err := regexp.Compile(e)
		if err != nil {
			return nil, fmt.Errorf("spec.exclude[%d] %q: %w", i, e, err)
		}
		p.exclude = append(p.exclude, re)
	}
	return p, nil
}

// Rejection says why one tag was not selected.
type Rejection struct {
	Tag    string `json:"tag"`
	Reason string `json:"reason"`
}

// Decision is what Select made of a list of tags.
type Decision struct {
	// Tag is the selected tag, empty when none qualifies.
	Tag string
	// Considered is how many tags were listed.
	Considered int
	// Skipped is how many tags did not parse under the policy (not a
	// semver, not a number).
	Skipped int
	// Rejected lists the tags not selected and why, in the order listed.
	Rejected []Rejection
}

type candidate struct {
	tag     string
	version *semver.Version
	number  float64
	key     string
}

// Select applies the policy to tags: the filter, the exclusions, then the
// order, and returns the first tag of that order.
func (p *Policy) Select(tags []string) Decision {
	d := Decision{Considered: len(tags)}
	var cands []candidate
	for _, tag := range tags {
		key := tag
		if p.filter != nil {
			m := p.filter.FindStringSubmatchIndex(tag)
			if m == nil {
				d.Rejected = append(d.Rejected, Rejection{tag, "does not match filterTags.pattern"})
				continue
			}
			if p.extract != "" {
				key = string(p.filter.ExpandString(nil, p.extract, tag, m))
			}
		}
		if re := p.excludedBy(tag); re != "" {
			d.Rejected = append(d.Rejected, Rejection{tag, fmt.Sprintf("excluded by %q", re)})
			continue
		}
		c := candidate{tag: tag, key: key}
		switch {
		case p.semver != nil:
			v, err := semver.NewVersion(key)
			if err != nil {
				d.Skipped++
				d.Rejected = append(d.Rejected, Rejection{tag, "not a semantic version"})
				continue
			}
			if !p.semver.Check(v) {
				d.Rejected = append(d.Rejected, Rejection{tag, "outside the range " + p.semver.String()})
				continue
			}
			c.version = v
		case p.numerical:
			f, err := strconv.ParseFloat(key, 64)
			if err != nil {
				d.Skipped++
				d.Rejected = append(d.Rejected, Rejection{tag, "not a number"})
				continue
			}
			c.number = f
		}
		cands = append(cands, c)
	}
	if len(cands) == 0 {
		return d
	}
	sort.SliceStable(cands, func(i, j int) bool { return p.less(cands[j], cands[i]) }) // best first
	d.Tag = cands[0].tag
	for _, c := range cands[1:] {
		d.Rejected = append(d.Rejected, Rejection{c.tag, "lower than " + d.Tag})
	}
	return d
}

// less orders a before b; the selected tag is the greatest.
func (p *Policy) less(a, b candidate) bool {
	var cmp int
	switch {
	case p.semver != nil:
		cmp = a.version.Compare(b.version)
		if cmp == 0 { // 1.2.3 and v1.2.3: prefer a stable, deterministic choice
			cmp = strings.Compare(a.tag, b.tag)
		}
	case p.numerical:
		switch {
		case a.number < b.number:
			cmp = -1
		case a.number > b.number:
			cmp = 1
		}
	default:
		cmp = strings.Compare(a.key, b.key)
	}
	if p.desc {
		cmp = -cmp
	}
	return cmp < 0
}

func (p *Policy) excludedBy(tag string) string {
	for _, re := range p.exclude {
		if re.MatchString(tag) {
			return re.String()
		}
	}
	return ""
}

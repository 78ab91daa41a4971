package charts

import (
	"fmt"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// maxListed is how many available versions a no-match error names.
const maxListed = 5

// versionRange parses a Ref's Version: empty means the highest stable
// version ("*", which excludes prereleases).
func versionRange(want string) (*semver.Constraints, error) {
	if strings.TrimSpace(want) == "" {
		want = "*"
	}
	c, err := semver.NewConstraint(want)
	if err != nil {
		return nil, fmt.Errorf("version %q is neither a version nor a semver range (such as 1.4.0, 1.4.x, \"~1.4\" or \">=1.2 <2\"): %w", want, err)
	}
	return c, nil
}

// exactVersion reports whether want is one exact version (1.4.0), which
// an OCI registry can be asked for directly without listing its tags.
func exactVersion(want string) bool {
	_, err := semver.StrictNewVersion(want)
	return err == nil
}

// pickVersion returns the highest of raws that want allows, or "" when
// none does; available is the valid versions, highest first. A version
// written exactly as want wins, so "1.2.3+a" is not confused with
// "1.2.3+b". Strings that are not semver are ignored.
func pickVersion(raws []string, want string) (picked string, available []string, err error) {
	c, err := versionRange(want)
	if err != nil {
		return "", nil, err
	}
	type candidate struct {
		v   *semver.Version
		raw string
	}
	cands := make([]candidate, 0, len(raws))
	for _, raw := range raws {
		if raw == want && want != "" {
			picked = raw
		}
		v, err := semver.NewVersion(raw)
		if err != nil {
			continue
		}
		cands = append(cands, candidate{v, raw})
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].v.GreaterThan(cands[j].v) })
	available = make([]string, len(cands))
	for i, cand := range cands {
		available[i] = cand.raw
	}
	if picked != "" {
		return picked, available, nil
	}
	for _, cand := range cands {
		if c.Check(cand.v) {
			return cand.raw, available, nil
		}
	}
	return "", available, nil
}

// listVersions names up to maxListed versions for an error message.
func listVersions(available []string) string {
	if len(available) == 0 {
		return "none"
	}
	if len(available) > maxListed {
		return strings.Join(available[:maxListed], ", ") + fmt.Sprintf(" (and %d more)", len(available)-maxListed)
	}
	return strings.Join(available, ", ")
}

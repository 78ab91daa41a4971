package charts_test

import (
	"strings"
	"testing"

	"github.com/driftless/driftless/internal/source/charts"
	"github.com/driftless/driftless/internal/testenv"
)

// pushWeb pushes web 1.2.0, 1.3.0 and 2.0.0 to charts/web and returns
// their archives and layer digests.
func pushWeb(t *testing.T, reg *testenv.OCIRegistry) (archives, digests map[string]string) {
	t.Helper()
	archives, digests = map[string]string{}, map[string]string{}
	for _, v := range []string{"1.2.0", "1.3.0", "2.0.0"} {
		a := testenv.PackageChart(t, "web", v)
		archives[v] = string(a)
		digests[v] = reg.PushChart(t, "charts/web", "web", v, a)
	}
	return archives, digests
}

func TestOCIExactVersionAndRange(t *testing.T) {
	ctx := fetchCtx(t)
	reg := testenv.NewOCIRegistry(t, "", "")
	archives, digests := pushWeb(t, reg)
	f := &charts.Fetcher{Dir: t.TempDir()}

	for _, tc := range []struct {
		name string
		ref  charts.Ref
		want string
	}{
		{"an exact version is pulled by its tag", charts.Ref{OCI: reg.URL("charts/web"), Version: "1.2.0", Insecure: true}, "1.2.0"},
		{"a range picks the highest matching tag", charts.Ref{OCI: reg.URL("charts/web"), Version: ">=1.2 <2", Insecure: true}, "1.3.0"},
		{"no version is the highest stable tag", charts.Ref{OCI: reg.URL("charts/web"), Insecure: true}, "2.0.0"},
		{"a name is appended to the repository", charts.Ref{OCI: reg.URL("charts"), Name: "web", Version: "1.2.0", Insecure: true}, "1.2.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := f.Fetch(ctx, tc.ref)
			if err != nil {
				t.Fatalf("fetch: %v", err)
			}
			if c.Name != "web" || c.Version != tc.want || c.Digest != digests[tc.want] {
				t.Errorf("fetched %s %s (%s), want web %s (%s)", c.Name, c.Version, c.Digest, tc.want, digests[tc.want])
			}
			assertCached(t, c, []byte(archives[tc.want]))
		})
	}
}

func TestOCIRangePicksUpANewTagAndSkipsDownloadingACachedDigest(t *testing.T) {
	ctx := fetchCtx(t)
	reg := testenv.NewOCIRegistry(t, "", "")
	pushWeb(t, reg)
	f := &charts.Fetcher{Dir: t.TempDir()}
	ref := charts.Ref{OCI: reg.URL("charts/web"), Version: "1.x", Insecure: true}

	if c, err := f.Fetch(ctx, ref); err != nil || c.Version != "1.3.0" {
		t.Fatalf("fetch = %s, %v; want 1.3.0", c.Version, err)
	}
	blobs := reg.BlobDownloads()
	if c, err := f.Fetch(ctx, ref); err != nil || c.Version != "1.3.0" {
		t.Fatalf("second fetch = %s, %v; want 1.3.0", c.Version, err)
	}
	if n := reg.BlobDownloads() - blobs; n != 0 {
		t.Errorf("the second fetch downloaded %d blobs, want 0: the chart's digest is cached", n)
	}

	// Helm writes "+" as "_" in tags; the version keeps its "+".
	archive := testenv.PackageChart(t, "web", "1.4.0+build.7")
	digest := reg.PushChart(t, "charts/web", "web", "1.4.0+build.7", archive)
	c, err := f.Fetch(ctx, ref)
	if err != nil {
		t.Fatalf("fetch after pushing 1.4.0+build.7: %v", err)
	}
	if c.Version != "1.4.0+build.7" || c.Digest != digest {
		t.Errorf("after pushing 1.4.0+build.7 fetched %s (%s), want 1.4.0+build.7 (%s)", c.Version, c.Digest, digest)
	}
	assertCached(t, c, archive)
}

func TestOCIFailures(t *testing.T) {
	ctx := fetchCtx(t)
	reg := testenv.NewOCIRegistry(t, "pusher", "right-password-2")
	pushWeb(t, reg)
	gone := testenv.NewOCIRegistry(t, "", "")
	goneURL := gone.URL("charts/web")
	gone.Close()
	f := &charts.Fetcher{Dir: t.TempDir()}
	good := charts.Credentials{Username: "pusher", Password: "right-password-2"}

	for _, tc := range []struct {
		name     string
		ref      charts.Ref
		kind     error
		contains []string
	}{
		{
			name:     "wrong basic auth says to check the secretRef",
			ref:      charts.Ref{OCI: reg.URL("charts/web"), Version: "1.2.0", Insecure: true, Credentials: charts.Credentials{Username: "pusher", Password: "wrong-password-2"}},
			kind:     charts.ErrUnauthorized,
			contains: []string{"401", "spec.chart.secretRef"},
		},
		{
			name:     "no credentials listing tags says to check the secretRef",
			ref:      charts.Ref{OCI: reg.URL("charts/web"), Version: "1.x", Insecure: true},
			kind:     charts.ErrUnauthorized,
			contains: []string{"spec.chart.secretRef"},
		},
		{
			name:     "a range no tag matches lists the available versions",
			ref:      charts.Ref{OCI: reg.URL("charts/web"), Version: "^3", Insecure: true, Credentials: good},
			kind:     charts.ErrNoMatchingVersion,
			contains: []string{"2.0.0, 1.3.0, 1.2.0"},
		},
		{
			name:     "an exact version that is not pushed is not found",
			ref:      charts.Ref{OCI: reg.URL("charts/web"), Version: "9.9.9", Insecure: true, Credentials: good},
			kind:     charts.ErrChartNotFound,
			contains: []string{"web 9.9.9", "spec.chart.version"},
		},
		{
			name:     "a registry that is down is unreachable",
			ref:      charts.Ref{OCI: goneURL, Version: "1.2.0", Insecure: true},
			kind:     charts.ErrUnreachable,
			contains: []string{"chart repository " + gone.Host + " is unreachable"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.Fetch(ctx, tc.ref)
			assertFailure(t, err, tc.kind, tc.contains...)
			if strings.Contains(err.Error(), "password-2") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}

	c, err := f.Fetch(ctx, charts.Ref{OCI: reg.URL("charts/web"), Version: "1.x", Insecure: true, Credentials: good})
	if err != nil || c.Version != "1.3.0" {
		t.Errorf("fetch with the right credentials = %s, %v; want 1.3.0", c.Version, err)
	}
}

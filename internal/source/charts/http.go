package charts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/driftless/driftless/internal/source"
)

// repoIndex is what the Fetcher keeps of a repository's index.yaml.
type repoIndex struct {
	etag, lastModified string
	entries            map[string][]indexEntry
}

// indexFile is the part of a Helm repository index.yaml that is read.
type indexFile struct {
	APIVersion string                  `json:"apiVersion"`
	Entries    map[string][]indexEntry `json:"entries"`
}

type indexEntry struct {
	Name    string   `json:"name"`
	Version string   `json:"version"`
	URLs    []string `json:"urls"`
	Digest  string   `json:"digest"`
}

func (f *Fetcher) fetchHTTP(ctx context.Context, ref Ref, dir scope) (Chart, error) {
	rt, err := f.roundTripper(ref)
	if err != nil {
		return Chart{}, err
	}
	client := &http.Client{Transport: rt}
	base, _ := url.Parse(ref.Repository) // checked by Ref.check
	base.Path = strings.TrimSuffix(base.Path, "/") + "/"
	base.RawPath = ""

	idx, err := f.index(ctx, client, ref, base, dir)
	if err != nil {
		return Chart{}, err
	}
	entries, ok := idx.entries[ref.Name]
	if !ok {
		return Chart{}, failure(ErrChartNotFound, ref, fmt.Sprintf("chart %s is not in the index of %s (it lists %s): check spec.chart.name",
			ref.Name, ref.Source(), listNames(idx.entries)), nil)
	}
	versions := make([]string, len(entries))
	for i, e := range entries {
		versions[i] = e.Version
	}
	picked, available, _ := pickVersion(versions, ref.Version) // the range was checked by Fetch
	if picked == "" {
		return Chart{}, noMatch(ref, available)
	}
	var entry indexEntry
	for _, e := range entries {
		if e.Version == picked {
			entry = e
			break
		}
	}
	name := entry.Name
	if name == "" {
		name = ref.Name
	}
	if len(entry.URLs) == 0 {
		return Chart{}, failure(ErrInvalidResponse, ref, fmt.Sprintf("chart %s %s in the index of %s has no download URL", name, picked, ref.Source()), nil)
	}
	want := ""
	if entry.Digest != "" {
		if want = normalDigest(entry.Digest); want == "" {
			return Chart{}, failure(ErrInvalidResponse, ref, fmt.Sprintf("chart %s %s in the index of %s has a digest that is not a sha256: %q", name, picked, ref.Source(), entry.Digest), nil)
		}
		if dir.cached(want) {
			return Chart{Path: dir.path(want), Name: name, Version: picked, Digest: "sha256:" + want}, nil
		}
	}
	got, err := f.download(ctx, client, ref, base, entry.URLs[0], name, picked, want, dir)
	if err != nil {
		return Chart{}, err
	}
	return Chart{Path: dir.path(got), Name: name, Version: picked, Digest: "sha256:" + got}, nil
}

// index returns the repository's index, asking the server only whether
// it changed when one is already known with these credentials.
func (f *Fetcher) index(ctx context.Context, client *http.Client, ref Ref, base *url.URL, dir scope) (*repoIndex, error) {
	u := base.ResolveReference(&url.URL{Path: "index.yaml"})
	key := string(dir) + " " + u.String()
	f.mu.Lock()
	known := f.indexes[key]
	f.mu.Unlock()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, failure(ErrInvalidRef, ref, fmt.Sprintf("spec.chart.repository %s: %v", ref.Source(), scrubErr(err, ref.Credentials)), nil)
	}
	authorize(req, ref.Credentials)
	if known != nil {
		if known.etag != "" {
			req.Header.Set("If-None-Match", known.etag)
		}
		if known.lastModified != "" {
			req.Header.Set("If-Modified-Since", known.lastModified)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, unreachable(ref, err)
	}
	defer drain(resp.Body)
	if resp.StatusCode == http.StatusNotModified && known != nil {
		return known, nil
	}
	if err := statusError(ref, resp, "index.yaml"); err != nil {
		return nil, err
	}
	limit := f.maxIndex()
	if resp.ContentLength > limit {
		return nil, tooLarge(ref, "index.yaml", limit)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, unreachable(ref, err)
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(ref, "index.yaml", limit)
	}
	var file indexFile
	if err := yaml.Unmarshal(data, &file); err != nil || file.Entries == nil && file.APIVersion == "" {
		return nil, failure(ErrInvalidResponse, ref, fmt.Sprintf("%s is not a Helm repository: its index.yaml does not parse as one: check spec.chart.repository", ref.Source()), nil)
	}
	idx := &repoIndex{etag: resp.Header.Get("ETag"), lastModified: resp.Header.Get("Last-Modified"), entries: file.Entries}
	if idx.etag != "" || idx.lastModified != "" {
		f.mu.Lock()
		if f.indexes == nil {
			f.indexes = map[string]*repoIndex{}
		}
		f.indexes[key] = idx
		f.mu.Unlock()
	}
	return idx, nil
}

// download fetches a chart archive into the cache and returns its digest.
func (f *Fetcher) download(ctx context.Context, client *http.Client, ref Ref, base *url.URL, raw, name, version, want string, dir scope) (string, error) {
	rel, err := url.Parse(raw)
	if err != nil {
		return "", failure(ErrInvalidResponse, ref, fmt.Sprintf("chart %s %s in the index of %s has an invalid URL", name, version, ref.Source()), nil)
	}
	u := base.ResolveReference(rel)
	if u.Scheme != "https" && u.Scheme != "http" {
		return "", failure(ErrInvalidResponse, ref, fmt.Sprintf("chart %s %s in the index of %s has a URL that is not http(s)", name, version, ref.Source()), nil)
	}
	if err := checkHost(ref, fmt.Sprintf("the download URL of chart %s %s in the index of %s", name, version, ref.Source()), u.Host); err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", failure(ErrInvalidResponse, ref, fmt.Sprintf("chart %s %s: %v", name, version, scrubErr(err, ref.Credentials)), nil)
	}
	// Credentials go only to the repository's own host, as Helm does.
	if strings.EqualFold(u.Host, base.Host) && u.Scheme == base.Scheme {
		authorize(req, ref.Credentials)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", unreachable(ref, err)
	}
	defer drain(resp.Body)
	what := fmt.Sprintf("chart %s %s", name, version)
	if err := statusError(ref, resp, what); err != nil {
		return "", err
	}
	limit := f.maxChart()
	if resp.ContentLength > limit {
		return "", tooLarge(ref, what, limit)
	}
	got, _, err := dir.store(resp.Body, limit, want)
	switch {
	case errors.Is(err, errTooLarge):
		return "", tooLarge(ref, what, limit)
	case errors.Is(err, errDigestMismatch):
		return "", mismatch(ref, name, version, want, got)
	case err != nil && isNetwork(err):
		return "", unreachable(ref, err)
	case err != nil:
		return "", fmt.Errorf("store %s in the chart cache: %w", what, err)
	}
	f.downloads.Add(1)
	return got, nil
}

// authorize adds the credentials to req: basic auth with a username,
// else a bearer token.
func authorize(req *http.Request, c Credentials) {
	switch {
	case c.Username != "" && c.Password == "" && c.Token != "":
		req.SetBasicAuth(c.Username, c.Token)
	case c.Username != "" || c.Password != "":
		req.SetBasicAuth(c.Username, c.Password)
	case c.Token != "":
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	req.Header.Set("User-Agent", userAgent)
}

// statusError words a response that is not 200 OK.
func statusError(ref Ref, resp *http.Response, what string) error {
	code := resp.StatusCode
	status := fmt.Sprintf("%d %s", code, http.StatusText(code))
	switch {
	case code == http.StatusOK:
		return nil
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return failure(ErrUnauthorized, ref, fmt.Sprintf("%s refused %s (%s): check the credentials in the Secret named by spec.chart.secretRef (keys %s and %s, or %s)",
			ref.Source(), what, status, SecretKeyUsername, SecretKeyPassword, SecretKeyToken), nil)
	case code == http.StatusNotFound:
		if what == "index.yaml" {
			return failure(ErrChartNotFound, ref, fmt.Sprintf("%s has no index.yaml (%s): check that spec.chart.repository is a Helm repository", ref.Source(), status), nil)
		}
		return failure(ErrChartNotFound, ref, fmt.Sprintf("%s is listed in the index of %s but its download answered %s", what, ref.Source(), status), nil)
	case code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout:
		return failure(ErrUnreachable, ref, fmt.Sprintf("%s answered %s for %s: try again later", ref.Source(), status, what), nil)
	}
	return failure(ErrInvalidResponse, ref, fmt.Sprintf("%s answered %s for %s", ref.Source(), status, what), nil)
}

// unreachable words a transport failure: the host and the cause, not the
// URL.
func unreachable(ref Ref, err error) *Error {
	var refused *Error
	if errors.As(err, &refused) {
		return refused // a request the Transport refused (hostsOnly)
	}
	cause := scrubErr(err, ref.Credentials)
	field := "spec.chart.repository"
	if ref.OCI != "" {
		field = "spec.chart.oci"
	}
	return failure(ErrUnreachable, ref, fmt.Sprintf("chart repository %s is unreachable: %v: check %s and that the agent can reach it", hostOf(ref), cause, field), cause)
}

// checkHost refuses host when ref.Hosts does not allow it; what names the
// address for the message.
func checkHost(ref Ref, what, host string) error {
	if ref.Hosts.Allows(host) {
		return nil
	}
	e := &source.HostNotAllowedError{What: what, Host: host, Hosts: ref.Hosts}
	return failure(ErrHostNotAllowed, ref, e.Error(), nil)
}

// hostOf is the repository's or registry's host.
func hostOf(ref Ref) string {
	raw := ref.Repository
	if ref.OCI != "" {
		raw = ref.OCI
	}
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return ref.Source()
}

// noMatch words a range no version satisfies.
func noMatch(ref Ref, available []string) *Error {
	want := ref.Version
	if want == "" {
		want = "any stable version"
	} else {
		want = fmt.Sprintf("%q", want)
	}
	return failure(ErrNoMatchingVersion, ref, fmt.Sprintf("no version of chart %s in %s matches %s; available: %s: change spec.chart.version",
		chartName(ref), ref.Source(), want, listVersions(available)), nil)
}

// chartName is the chart's name for messages.
func chartName(ref Ref) string {
	if ref.Name != "" {
		return ref.Name
	}
	p := strings.TrimSuffix(ref.OCI, "/")
	return p[strings.LastIndex(p, "/")+1:]
}

// listNames names up to maxListed charts of an index.
func listNames(entries map[string][]indexEntry) string {
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "no charts"
	}
	if len(names) > maxListed {
		return strings.Join(names[:maxListed], ", ") + fmt.Sprintf(" and %d more", len(names)-maxListed)
	}
	return strings.Join(names, ", ")
}

// drain reads what is left of a body (bounded) so the connection can be
// reused, and closes it.
func drain(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, 64<<10)
	_ = body.Close()
}

package policy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/driftless/driftless/internal/testenv"
)

func fastOptions() ScanOptions {
	o := DefaultScanOptions()
	o.RetryDelay = time.Millisecond
	o.RequestsPerSecond = 0
	return o
}

func TestScannerListsEveryPageOfTags(t *testing.T) {
	reg := testenv.NewRegistry(t)
	for i := range 5 {
		reg.Push(t, "app", fmt.Sprintf("1.0.%d", i))
	}
	opts := fastOptions()
	opts.PageSize = 2
	s := NewScanner(opts)
	tags, err := s.List(context.Background(), Target{Image: reg.Host() + "/app", Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) != 5 {
		t.Errorf("listed %v, want the 5 tags pushed", tags)
	}
	if got := reg.TagPages(); got < 3 {
		t.Errorf("%d pages requested, want at least 3 (5 tags by 2)", got)
	}
}

func TestScannerResolvesTheDigestOfATag(t *testing.T) {
	reg := testenv.NewRegistry(t)
	want := reg.Push(t, "app", "1.2.3")
	got, err := NewScanner(fastOptions()).Digest(context.Background(), Target{Image: reg.Host() + "/app", Insecure: true}, "1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("digest %s, want %s", got, want)
	}
}

func TestScannerRetriesWhenTheRegistryAsksToSlowDown(t *testing.T) {
	reg := testenv.NewRegistry(t)
	reg.Push(t, "app", "1.0.0")
	reg.FailNext(2)
	tags, err := NewScanner(fastOptions()).List(context.Background(), Target{Image: reg.Host() + "/app", Insecure: true})
	if err != nil {
		t.Fatalf("two 429 answers then success: %v", err)
	}
	if len(tags) != 1 {
		t.Errorf("tags %v, want [1.0.0]", tags)
	}
}

func TestScannerGivesUpAfterItsRetries(t *testing.T) {
	reg := testenv.NewRegistry(t)
	reg.Push(t, "app", "1.0.0")
	reg.FailNext(1000)
	reg.ResetRequests()
	opts := fastOptions()
	opts.Retries = 2
	_, err := NewScanner(opts).List(context.Background(), Target{Image: reg.Host() + "/app", Insecure: true})
	if err == nil || !strings.Contains(err.Error(), "429") {
		t.Fatalf("error = %v, want one saying the registry is rate limiting", err)
	}
	if n := reg.Requests(); n > 10 {
		t.Errorf("%d requests for 2 retries, want a bounded number", n)
	}
}

func TestScannerUsesTheSecretsCredentials(t *testing.T) {
	reg := testenv.NewRegistry(t)
	reg.RequireAuth("robot", "s3cret-value")
	reg.Push(t, "app", "1.0.0")

	tests := []struct {
		name    string
		data    map[string][]byte
		wantErr string
	}{
		{"basic auth keys", map[string][]byte{"username": []byte("robot"), "password": []byte("s3cret-value")}, ""},
		{"a docker config JSON", map[string][]byte{".dockerconfigjson": fmt.Appendf(nil,
			`{"auths":{%q:{"username":"robot","password":"s3cret-value"}}}`, "http://"+reg.Host())}, ""},
		{"a wrong password", map[string][]byte{"username": []byte("robot"), "password": []byte("wrong-pass")}, "refused the credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			auth, err := AuthFromSecret(tt.data, reg.Host())
			if err != nil {
				t.Fatal(err)
			}
			_, err = NewScanner(fastOptions()).List(context.Background(), Target{Image: reg.Host() + "/app", Insecure: true, Auth: auth})
			if tt.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "wrong-pass") {
					t.Errorf("error %q shows the password", err)
				}
			}
		})
	}
}

func TestScannerRateLimitsPerRegistry(t *testing.T) {
	reg := testenv.NewRegistry(t)
	reg.Push(t, "app", "1.0.0")
	reg.ResetRequests()
	opts := fastOptions()
	opts.RequestsPerSecond, opts.Burst = 20, 1
	s := NewScanner(opts)
	start := time.Now()
	for range 3 {
		if _, err := s.List(context.Background(), Target{Image: reg.Host() + "/app", Insecure: true}); err != nil {
			t.Fatal(err)
		}
	}
	// A lower bound only: at 20 requests per second, n requests cannot
	// take less than (n-1)/20 s.
	n := reg.Requests()
	if floor := time.Duration(n-1) * time.Second / 20; time.Since(start) < floor {
		t.Errorf("%d requests in %s, faster than the limit of 20 per second allows (%s)", n, time.Since(start), floor)
	}
}

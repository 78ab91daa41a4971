package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

func TestHistoryShowsEachSyncNewestFirstWithWhatItChanged(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	first := repo.Commit(t, "initial", map[string]string{"workloads/config.yaml": diffConfigMap("", "web-config", "v1")})
	key := diffCreateSync(t, cl, ns, repo.FileURL())
	diffSyncOnce(t, cl, key)
	second := repo.Commit(t, "new greeting and a second app", map[string]string{
		"workloads/config.yaml": diffConfigMap("", "web-config", "v2"),
		"workloads/api.yaml":    diffConfigMap("", "api-config", "v1"),
	})
	diffSyncOnce(t, cl, key)
	kubeconfig := env.ControlPlane.KubeconfigPath()

	table := runCLI(t, "history", key.String(), "--kubeconfig", kubeconfig).expect(t, 0)
	rows := tableRows(t, table.out)
	type shown struct{ Revision, Subject, Author, Result, Created, Configured, Unchanged, Pruned, Message string }
	var got []shown
	for _, r := range rows {
		got = append(got, shown{r["REVISION"], r["SUBJECT"], r["AUTHOR"], r["RESULT"], r["CREATED"], r["CONFIGURED"], r["UNCHANGED"], r["PRUNED"], r["MESSAGE"]})
	}
	want := []shown{
		{second[:7], "new greeting and a second app", "driftless test", "Succeeded", "1", "1", "0", "0", "applied " + second[:7] + ": 1 created, 1 configured, 0 unchanged, 0 pruned"},
		{first[:7], "initial", "driftless test", "Succeeded", "1", "0", "0", "0", "applied " + first[:7] + ": 1 created, 0 configured, 0 unchanged, 0 pruned"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("history (-want +got):\n%s\n%s", diff, table.out)
	}
	for _, r := range rows {
		if !strings.HasSuffix(r["STARTED"], "Z") || r["AGE"] == "" || r["DURATION"] == "" {
			t.Errorf("a record lacks its age, UTC start or duration: %v", r)
		}
	}

	js := runCLI(t, "history", key.String(), "-o", "json", "--kubeconfig", kubeconfig).expect(t, 0)
	var doc struct {
		Sync    string
		History []map[string]any
	}
	if err := json.Unmarshal([]byte(js.out), &doc); err != nil || doc.Sync != key.String() || len(doc.History) != 2 {
		t.Fatalf("-o json is not {sync, history: [2 records]} (%v):\n%s", err, js.out)
	}
	newest := doc.History[0]
	for _, field := range []string{"startedAt", "duration", "message"} {
		if _, ok := newest[field]; !ok {
			t.Errorf("-o json record lacks %q: %v", field, newest)
		}
	}
	wantChanges := []any{
		map[string]any{"action": "Created", "object": "ConfigMap/" + ns + "/api-config"},
		map[string]any{"action": "Configured", "object": "ConfigMap/" + ns + "/web-config"},
	}
	if diff := cmp.Diff(wantChanges, newest["changes"]); diff != "" {
		t.Errorf("-o json newest record's changes (-want +got):\n%s", diff)
	}
	if newest["subject"] != "new greeting and a second app" || newest["author"] != "driftless test" {
		t.Errorf("-o json newest record = %v, want the commit's subject and author", newest)
	}
	if newest["revision"] != second || newest["result"] != "Succeeded" || newest["created"] != 1.0 || newest["configured"] != 1.0 || newest["adopted"] != 0.0 {
		t.Errorf("-o json newest record = %v, want %s Succeeded with 1 created, 1 configured, 0 adopted", newest, second)
	}
}

func TestHistoryOfASyncThatDoesNotExistSaysWhereItLookedAndWhatToRun(t *testing.T) {
	diffClusterClient(t)
	ns := env.Namespace(t)
	r := runCLI(t, "history", ns+"/nosuch", "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 2)
	for _, want := range []string{"no Sync named nosuch in namespace " + ns, "driftless get syncs -A"} {
		if !strings.Contains(r.errOut, want) {
			t.Errorf("error lacks %q: %s", want, r.errOut)
		}
	}
}

// A sync that changes many objects records the first of them by name and
// counts the rest, so a Sync's status stays small; --changes lists them.
func TestHistoryListsAtMostTwentyChangedObjectsPerSyncAndCountsTheRest(t *testing.T) {
	cl := diffClusterClient(t)
	ns := env.Namespace(t)
	repo := testenv.NewGitServer(t).NewRepo(t, "fleet")
	files := map[string]string{}
	for i := range 25 {
		files[fmt.Sprintf("workloads/cm-%02d.yaml", i)] = diffConfigMap("", fmt.Sprintf("cm-%02d", i), "v1")
	}
	rev := repo.Commit(t, "twenty-five ConfigMaps\n\nThe body is not the subject.", files)
	key := diffCreateSync(t, cl, ns, repo.FileURL())
	diffSyncOnce(t, cl, key)

	var s v1alpha1.Sync
	if err := cl.Get(context.Background(), key, &s); err != nil {
		t.Fatal(err)
	}
	r := s.Status.History[0]
	if len(r.Changes) != v1alpha1.MaxRecordChanges || r.MoreChanges != 5 || r.Subject != "twenty-five ConfigMaps" {
		t.Errorf("record has %d changes, %d more, subject %q; want 20, 5, the first line of the message", len(r.Changes), r.MoreChanges, r.Subject)
	}
	out := runCLI(t, "history", key.String(), "--changes", "--kubeconfig", env.ControlPlane.KubeconfigPath()).expect(t, 0).out
	for _, want := range []string{rev[:7] + " ", "  created     ConfigMap/" + ns + "/cm-00\n", "  and 5 more\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("history --changes lacks %q:\n%s", want, out)
		}
	}
}

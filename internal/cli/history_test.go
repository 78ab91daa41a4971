package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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
	type shown struct{ Revision, Result, Created, Configured, Unchanged, Pruned, Message string }
	var got []shown
	for _, r := range rows {
		got = append(got, shown{r["REVISION"], r["RESULT"], r["CREATED"], r["CONFIGURED"], r["UNCHANGED"], r["PRUNED"], r["MESSAGE"]})
	}
	want := []shown{
		{second[:7], "Succeeded", "1", "1", "0", "0", "applied " + second[:7] + ": 1 created, 1 configured, 0 unchanged, 0 pruned"},
		{first[:7], "Succeeded", "1", "0", "0", "0", "applied " + first[:7] + ": 1 created, 0 configured, 0 unchanged, 0 pruned"},
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

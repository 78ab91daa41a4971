package ui_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/driftless/driftless/api/v1alpha1"
	"github.com/driftless/driftless/internal/testenv"
)

// chromium is the browser the tests drive: Debian's package chromium
// (.ci/run installs it).
const chromium = "/usr/bin/chromium"

// browser starts a headless Chromium for the test, its window width × 900.
func browser(t *testing.T, width int) context.Context {
	t.Helper()
	if _, err := exec.LookPath(chromium); err != nil {
		testenv.MissingTool(t, "the browser tests need %s: apt-get install -y chromium", chromium)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(width, 900),
		chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), 900)); err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	return ctx
}

// do runs steps in the browser, failing the test with what was done.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	step, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(step, steps...); err != nil {
		var body string
		text, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body ? document.body.innerText : ''"))
		body = text
		t.Fatalf("%s: %v\npage text:\n%s", what, err, body)
	}
}

// text is the text of the page's body.
func text(t *testing.T, ctx context.Context) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body.innerText"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// axeViolation is a serious or critical violation axe-core found.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// checkAccessible runs axe-core (testdata/axe-core) in the page and
// fails the test on each serious or critical violation.
func checkAccessible(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](string(src))); err != nil {
		t.Fatalf("inject axe-core into the %s page: %v", page, err)
	}
	found, err := chromedp.Run(ctx, chromedp.Evaluate[[]axeViolation](`axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations
		.filter(v => v.impact === "serious" || v.impact === "critical")
		.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 5).map(n => n.target.join(" "))})))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("run axe-core on the %s page: %v", page, err)
	}
	for _, v := range found {
		t.Errorf("the %s page: axe-core %s violation %s (%s) at %v", page, v.Impact, v.ID, v.Help, v.Nodes)
	}
}

// checkNoOverflow fails the test when the page is wider than the window:
// a reader would have to scroll the whole page sideways.
func checkNoOverflow(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	type widths struct {
		Scroll int `json:"scroll"`
		Inner  int `json:"inner"`
		// Wide are the elements that reach past the window's right edge.
		Wide []string `json:"wide"`
	}
	w, err := chromedp.Run(ctx, chromedp.Evaluate[widths](`({scroll: document.documentElement.scrollWidth, inner: window.innerWidth,
		wide: [...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)
			.slice(0, 8).map(e => e.tagName + (e.className ? "." + e.className : "") + " " + Math.round(e.getBoundingClientRect().right) + "px")})`))
	if err != nil {
		t.Fatal(err)
	}
	if w.Scroll > w.Inner {
		t.Errorf("the %s page is %d px wide in a %d px window; wider elements: %v", page, w.Scroll, w.Inner, w.Wide)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("DRIFTLESS_UI_SCREENSHOTS"); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.png", page, w.Inner)), shot, 0o644)
	}
}

// TestDashboardInABrowserFollowsDriftLiveAndActsAsTheViewer drives
// Chromium through `driftless ui`: the fleet lists the Sync; one click
// opens it; a hand edit the agent reverts, and then a new Event, appear on
// the open page without a reload; the suspend button, confirmed, suspends it; the viewer whose
// RBAC forbids writes sees the API server's refusal. Every page passes
// axe-core with no serious or critical violation.
func TestDashboardInABrowserFollowsDriftLiveAndActsAsTheViewer(t *testing.T) {
	ctx := browser(t, 1280)
	f := newFixture(t)
	addr, printed := dashboard(t, kubeconfig(t))
	syncPath := "/c/admin/syncs/" + f.ns + "/web"

	do(t, ctx, "open the fleet page", chromedp.Navigate(printed), chromedp.WaitVisible(chromedp.CSS(`a[href="`+syncPath+`"]`)))
	checkAccessible(t, ctx, "fleet")

	do(t, ctx, "click through to the Sync", chromedp.Click(chromedp.CSS(`a[href="`+syncPath+`"]`)), chromedp.WaitVisible(chromedp.CSS("#h-drift")))
	// The page follows the cluster once its stream is open.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("livestate").textContent.startsWith("Live:")`)); err != nil {
		t.Fatalf("the Sync page's live stream did not open: %v\n%s", err, text(t, ctx))
	}
	checkAccessible(t, ctx, "Sync")

	// A mark on the page: a reload would drop it.
	do(t, ctx, "mark the page", chromedp.Evaluate[chromedp.Void]("window.notReloaded = true"))
	edited := time.Now()
	f.handEdit(t, "edited-by-hand")
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](
		`document.getElementById("live").innerText.includes("hello → edited-by-hand") && window.notReloaded === true`,
		chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("the hand edit did not appear as a drift incident on the open page: %v\n%s", err, text(t, ctx))
	}
	t.Logf("the hand edit appeared on the open page %s after it was made", time.Since(edited).Round(time.Millisecond))

	// An Event alone (no change of the Sync) shows up too: Events are watched.
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "web.noted"}, EventTime: metav1.NowMicro(),
		ReportingController: "driftless.dev/ui-test", ReportingInstance: "ui-test", Action: "Note", Reason: "Noted", Type: corev1.EventTypeNormal,
		Note: "an Event alone updates the open page", Regarding: corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.SyncKind, Namespace: f.ns, Name: "web"}}
	if err := c.Create(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](
		`document.getElementById("live").innerText.includes("an Event alone updates the open page") && window.notReloaded === true`,
		chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("the new Event did not appear on the open page: %v\n%s", err, text(t, ctx))
	}

	do(t, ctx, "open an object", chromedp.Click(chromedp.CSS(`section[aria-labelledby="h-objects"] a[href*="/object?"]`)), chromedp.WaitVisible(chromedp.CSS("#h-managers")))
	checkAccessible(t, ctx, "object")

	do(t, ctx, "ask to suspend", chromedp.Navigate(addr+syncPath), chromedp.Click(chromedp.CSS(`a[href="`+syncPath+`/suspend"]`)),
		chromedp.WaitVisible(chromedp.CSS("#confirm")))
	checkAccessible(t, ctx, "confirmation")
	if suspended(t, f.key) {
		t.Fatal("the Sync was suspended before the suspension was confirmed")
	}
	do(t, ctx, "confirm", chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#outcome")))
	if got := text(t, ctx); !strings.Contains(got, "Suspended: the agent changes nothing") || !suspended(t, f.key) {
		t.Errorf("after the confirmed suspend, suspended = %v and the page says:\n%s", suspended(t, f.key), got)
	}
	checkAccessible(t, ctx, "result")

	viewerPath := "/c/viewer/syncs/" + f.ns + "/web"
	do(t, ctx, "resume as the viewer", chromedp.Navigate(addr+viewerPath), chromedp.Click(chromedp.CSS(`a[href="`+viewerPath+`/resume"]`)),
		chromedp.WaitVisible(chromedp.CSS("#confirm")), chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#outcome")))
	if got := text(t, ctx); !strings.Contains(got, `User "viewer" cannot patch resource "syncs"`) || !suspended(t, f.key) {
		t.Errorf("the viewer's resume: suspended = %v, want still suspended and the API server's refusal on the page:\n%s", suspended(t, f.key), got)
	}
}

// TestDashboardIsReadableOnAPhone loads the fleet, Sync and object pages
// in a 390 px wide window: none is wider than the window.
func TestDashboardIsReadableOnAPhone(t *testing.T) {
	ctx := browser(t, 390)
	f := newFixture(t)
	f.handEdit(t, "a-rather-long-value-that-someone-typed-by-hand-into-the-cluster")
	addr, printed := dashboard(t, kubeconfig(t))
	syncPath := "/c/admin/syncs/" + f.ns + "/web"
	do(t, ctx, "open the fleet page", chromedp.Navigate(printed), chromedp.WaitVisible(chromedp.CSS(`a[href="`+syncPath+`"]`)))
	checkNoOverflow(t, ctx, "fleet")
	do(t, ctx, "open the Sync page", chromedp.Navigate(addr+syncPath), chromedp.WaitVisible(chromedp.CSS("#h-objects")))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("live").innerText.includes("a-rather-long-value")`,
		chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("the drift incident is not on the Sync page: %v", err)
	}
	checkNoOverflow(t, ctx, "sync")
	do(t, ctx, "open an object", chromedp.Click(chromedp.CSS(`section[aria-labelledby="h-objects"] a[href*="/object?"]`)), chromedp.WaitVisible(chromedp.CSS("#h-managers")))
	checkNoOverflow(t, ctx, "object")
	checkAccessible(t, ctx, "object at 390 px")
}

func suspended(t *testing.T, key client.ObjectKey) bool {
	t.Helper()
	var s v1alpha1.Sync
	if err := c.Get(context.Background(), key, &s); err != nil {
		t.Fatal(err)
	}
	return s.Spec.Suspend
}

package ui_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/driftless/driftless/internal/testenv"
)

// TestDashboardInABrowserShowsTwoClustersAndFollowsTheSecondLive starts a
// second control plane, a real agent in each, and `driftless ui
// --all-contexts` over a kubeconfig of both (contexts a and b): in
// Chromium the fleet lists the Syncs of both; a click opens b's Sync, and
// another one of its objects; back on the Sync page, a hand edit in
// cluster b appears there without a reload. One test, since two control
// planes cost memory and CPU.
func TestDashboardInABrowserShowsTwoClustersAndFollowsTheSecondLive(t *testing.T) {
	ctx := browser(t, 1280)
	envB, err := testenv.Start(context.Background())
	if err != nil {
		t.Fatalf("start a second control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := envB.Stop(); err != nil {
			t.Errorf("stop the second control plane: %v", err)
		}
	})
	cB, err := adminClient(envB)
	if err != nil {
		t.Fatal(err)
	}
	fa := newFixture(t)
	fb := newFixtureIn(t, envB, cB, nil)

	path := mergeKubeconfigs(t, "a", map[string]string{"a": env.ControlPlane.KubeconfigPath(), "b": envB.ControlPlane.KubeconfigPath()})
	_, printed := dashboard(t, path)

	pathA := "/c/a/syncs/" + fa.ns + "/web"
	pathB := "/c/b/syncs/" + fb.ns + "/web"
	do(t, ctx, "open the fleet page with both clusters' Syncs", chromedp.Navigate(printed),
		chromedp.WaitVisible(chromedp.CSS(`a[href="`+pathA+`"]`)), chromedp.WaitVisible(chromedp.CSS(`a[href="`+pathB+`"]`)))
	do(t, ctx, "click through to cluster b's Sync", chromedp.Click(chromedp.CSS(`a[href="`+pathB+`"]`)), chromedp.WaitVisible(chromedp.CSS("#h-objects")))
	do(t, ctx, "click through to one of its objects", chromedp.Click(chromedp.CSS(`section[aria-labelledby="h-objects"] a[href*="/object?"]`)),
		chromedp.WaitVisible(chromedp.CSS("#h-managers")))
	do(t, ctx, "back to the Sync", chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.CSS("#h-drift")))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("livestate").textContent.startsWith("Live:")`)); err != nil {
		t.Fatalf("the Sync page's live stream did not open: %v\n%s", err, text(t, ctx))
	}
	do(t, ctx, "mark the page", chromedp.Evaluate[chromedp.Void]("window.notReloaded = true"))
	fb.handEdit(t, "edited-in-b")
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](
		`document.getElementById("live").innerText.includes("hello → edited-in-b") && window.notReloaded === true`,
		chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("the hand edit in cluster b did not appear on its open Sync page: %v\n%s", err, text(t, ctx))
	}
}

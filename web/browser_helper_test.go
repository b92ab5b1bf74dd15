package web_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/approvals/approvals/internal/apptest"
)

// findChromium finds the browser as scripts/test does: chromium or
// chromium-browser on PATH, else /usr/bin/chromium; "" when none is there.
func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	return ""
}

// chrome is one headless Chromium for one test. Its methods fail the test
// on any error, so a test reads as the steps a person takes.
type chrome struct {
	t         *testing.T
	ctx       context.Context // the browser's; it lives until the test ends
	artifacts string          // where screenshots go
}

// startBrowser starts headless Chromium for t and stops it when t ends.
// Without chromium the test is skipped, unless CI is set: CI installs
// chromium, so there a missing browser is a failure, not a silent pass.
// Call it before any other set-up, so that a skip costs nothing.
func startBrowser(t *testing.T) *chrome {
	t.Helper()
	chromiumPath := findChromium()
	if chromiumPath == "" {
		if os.Getenv("CI") == "" {
			t.Skip("chromium is not installed: neither chromium nor chromium-browser is on PATH (CI installs it and runs this test)")
		}
		t.Fatal("CI must run the browser test, but neither chromium nor chromium-browser is on PATH")
	}
	artifacts := os.Getenv("ARTIFACTS_DIR")
	if artifacts == "" {
		artifacts = t.TempDir()
	} else if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	// Cleanups run last-in first-out: the browser closes before its allocator.
	t.Cleanup(cancelBrowser)
	// The first run starts the browser; it lives as long as browserCtx.
	if err := chromedp.Do(browserCtx); err != nil {
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	return &chrome{t: t, ctx: browserCtx, artifacts: artifacts}
}

// Step runs actions within timeout; name says which step failed.
func (b *chrome) Step(name string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", name, err)
	}
}

// Eval evaluates a JavaScript expression whose value is a string.
func (b *chrome) Eval(expr string) string {
	b.t.Helper()
	return evaluate[string](b, expr)
}

// evaluate evaluates a JavaScript expression whose value is a T (methods
// cannot have type parameters, so Eval is the string case).
func evaluate[T any](b *chrome, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// Screenshot writes a full-page PNG named name to ARTIFACTS_DIR.
func (b *chrome) Screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.artifacts, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s (%d bytes)", path, len(png))
}

// Key presses a shortcut key. A real browser types nothing when keydown is
// cancelled, as app.js does for a shortcut; CDP sends the character as a
// separate event, so the shortcut goes without it.
func (b *chrome) Key(k string) chromedp.Action[chromedp.Void] {
	return chromedp.KeyEvent(k, func(p *input.DispatchKeyEventParams) {
		if p.Type == input.DispatchKeyEventTypeChar {
			p.Text, p.UnmodifiedText = "", ""
		}
	})
}

// signIn is the actions that sign email in with apptest.Password on the
// dashboard at baseURL; the caller adds what the signed-in page must show.
func signIn(baseURL, email string, then ...chromedp.Action[chromedp.Void]) []chromedp.Action[chromedp.Void] {
	return append([]chromedp.Action[chromedp.Void]{
		chromedp.Navigate(baseURL + "/login"),
		chromedp.WaitVisible(chromedp.CSS("#email")),
		chromedp.SendKeys(chromedp.CSS("#email"), email),
		chromedp.SendKeys(chromedp.CSS("#password"), apptest.Password),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type=submit]`)),
	}, then...)
}

// liveConnected waits until the page's live stream is open, so a change
// made after it reaches the page without a reload.
var liveConnected = chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
	_, err := chromedp.Poll[bool](`document.getElementById("live-status").textContent === "Live"`)(ctx, tg)
	return err
})

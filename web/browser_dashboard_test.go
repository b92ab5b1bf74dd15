package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/queue"
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

// TestDashboardInBrowser drives headless Chromium: an approver signs in,
// watches a submission made through the REST API appear in the queue with
// no reload, opens it, approves it with the keyboard and sees the approved
// state. Screenshots of the queue and the action page go to ARTIFACTS_DIR.
func TestDashboardInBrowser(t *testing.T) {
	t.Parallel()
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

	d := startDashboard(t)
	d.addUser("ann@example.com", accounts.RoleApprover)
	token, hash := accounts.NewToken()
	if _, err := d.store.TokenCreate(context.Background(), "mailer", hash, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Something already waiting, so the screenshot shows a real queue.
	d.submitEmail("c-100", "Your order has shipped", "Hi Sam,\nyour order 100 is on its way.")
	d.submit("post_public_update", `{"channel":"status","slug":"maintenance","text":"Maintenance tonight 22:00 UTC"}`, "")

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	// The first run starts the browser; it lives as long as browserCtx.
	if err := chromedp.Do(browserCtx); err != nil {
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	step := func(name string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browserCtx, timeout)
		defer cancel()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(browserCtx, 10*time.Second)
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return v
	}
	screenshot := func(name string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browserCtx, 20*time.Second)
		defer cancel()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		path := filepath.Join(artifacts, name)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot %s (%d bytes)", path, len(png))
	}

	step("sign in", 30*time.Second,
		chromedp.Navigate(d.url+"/login"),
		chromedp.WaitVisible(chromedp.CSS("#email")),
		chromedp.SendKeys(chromedp.CSS("#email"), "ann@example.com"),
		chromedp.SendKeys(chromedp.CSS("#password"), dashPassword),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS("#queue")),
	)
	// The live stream is open before the submission.
	step("live updates connect", 10*time.Second,
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Poll[bool](`document.getElementById("live-status").textContent === "Live"`)(ctx, tg)
			return err
		}),
	)
	eval(`window.__sameDocument = "yes"; "ok"`)

	body := `{"tool":"send_customer_email","payload":{"customer_id":"c-7","topic":"refund","to":"dana@example.com",` +
		`"subject":"Your refund is on its way","body":"Hi Dana,\nwe refunded order 7. It reaches your card in 3 days."}}`
	req, _ := http.NewRequest(http.MethodPost, d.url+"/api/v1/actions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created queue.Action
	err = json.NewDecoder(res.Body).Decode(&created)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("submit through the API: %d %v", res.StatusCode, err)
	}
	submitted := time.Now()
	row := chromedp.CSS(`[data-row-link="` + created.ID + `"]`)
	step("submission appears in the queue", 5*time.Second, chromedp.WaitVisible(row))
	appeared := time.Since(submitted)
	// The bound is the step's 5 s: how fast it appears is a matter for
	// benchmarks (on a 2-core machine running other test packages at the
	// same time it can take over a second); the test checks that it
	// appears without a reload.
	t.Logf("the submission appeared in the open queue %s after the API answered", appeared.Round(time.Millisecond))
	if eval(`window.__sameDocument || "reloaded"`) != "yes" {
		t.Fatal("the page reloaded; the queue must update in place")
	}
	screenshot("queue.png")

	step("open the action", 15*time.Second,
		chromedp.Click(row),
		chromedp.WaitVisible(chromedp.CSS("#approve-form")),
	)
	if got := eval(`document.querySelector("[data-testid=preview-title]").textContent`); got != "Your refund is on its way" {
		t.Fatalf("preview title %q", got)
	}
	screenshot("action-pending.png")
	// Keyboard: "a" focuses the approval note; Enter approves (htmx).
	step("approve with the keyboard", 15*time.Second,
		// A real browser types nothing when keydown is cancelled, as app.js
		// does for a shortcut; CDP sends the character as a separate event,
		// so send the shortcut without it.
		chromedp.KeyEvent("a", func(p *input.DispatchKeyEventParams) {
			if p.Type == input.DispatchKeyEventTypeChar {
				p.Text, p.UnmodifiedText = "", ""
			}
		}),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Poll[bool](`document.activeElement && document.activeElement.id === "approve-note"`)(ctx, tg)
			return err
		}),
		chromedp.KeyEvent("Checked the amount\r"),
		chromedp.WaitVisible(chromedp.CSS(`#action[data-state="approved"] [data-testid="state"]`)),
	)
	if got := eval(`document.querySelector("[data-testid=state]").textContent`); got != "approved" {
		t.Fatalf("state shown %q, want approved", got)
	}
	if got := eval(`document.querySelector("[data-testid=decided-by]").textContent`); got != "user:ann@example.com" {
		t.Fatalf("decided by %q", got)
	}
	screenshot("action.png")

	a := d.action(created.ID)
	if a.State != queue.StateApproved || *a.DecidedBy != "user:ann@example.com" || *a.DecisionNote != "Checked the amount" {
		t.Fatalf("stored action %s by %v note %v", a.State, *a.DecidedBy, *a.DecisionNote)
	}
}

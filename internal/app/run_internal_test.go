package app

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// TestSetupLinkHostIsBrowsable: a server listening on every interface
// logs its setup link with localhost, not [::] or 0.0.0.0.
func TestSetupLinkHostIsBrowsable(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"[::]:8080":      "localhost:8080",
		"0.0.0.0:8080":   "localhost:8080",
		"127.0.0.1:8080": "127.0.0.1:8080",
		"[::1]:9000":     "[::1]:9000",
	}
	for in, want := range cases {
		addr, err := net.ResolveTCPAddr("tcp", in)
		if err != nil {
			t.Fatal(err)
		}
		if got := browsableAddr(addr); got != want {
			t.Errorf("browsableAddr(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestPprofEndsWithRun: the opt-in profiling listener serves while Run
// does and is closed when Run returns, so it does not outlive the process
// it profiles (tests call Run many times in one binary).
func TestPprofEndsWithRun(t *testing.T) {
	t.Parallel()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	free.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{DatabaseURL: "sqlite:" + filepath.Join(t.TempDir(), "a.db"), PprofAddr: addr, PublicURL: "http://" + ln.Addr().String(),
			Logger: slog.New(slog.DiscardHandler), SweepInterval: -1, OutboxPoll: -1, SealInterval: -1,
			Ready: func(*App) { close(ready) }}, ln)
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run returned before it served: %v", err)
	}
	url := "http://" + addr + "/debug/pprof/"
	var resp *http.Response
	for range 100 { // the listener starts beside Run, not before Ready
		if resp, err = http.Get(url); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("pprof while Run serves: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("pprof while Run serves: %s", resp.Status)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("pprof still listens on %s after Run returned", addr)
	}
}

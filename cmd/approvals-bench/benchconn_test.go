package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBenchClientSpeaksHTTP drives the load generator's client against a
// net/http server: request headers and body arrive, Content-Length and
// chunked bodies are read whole, a redirect is returned rather than
// followed, the connection is kept alive between requests and replaced
// after Connection: close or a transport error.
func TestBenchClientSpeaksHTTP(t *testing.T) {
	t.Parallel()
	var conns atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, r.Header.Get("Authorization")+"|"+r.Header.Get("Idempotency-Key")+"|"+
			r.Header.Get("Content-Type")+"|"+r.Header.Get("Cookie")+"|"+string(b))
	})
	big := strings.Repeat("0123456789", 3000)
	mux.HandleFunc("GET /chunked", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, big[:10000])
		w.(http.Flusher).Flush() // forces chunked encoding
		_, _ = io.WriteString(w, big[10000:])
	})
	mux.HandleFunc("GET /redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /close", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		_, _ = io.WriteString(w, "bye")
	})
	mux.HandleFunc("GET /empty", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	c, err := newBenchClient(benchConfig{URL: srv.URL, Token: "tok", Cookie: "approvals_session=s"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	ctx := t.Context()
	expect := func(method, path string, body []byte, key string, wantStatus int, wantBody string) {
		t.Helper()
		status, got, err := c.do(ctx, method, path, body, key)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		if status != wantStatus || string(got) != wantBody {
			t.Fatalf("%s %s: %d %.80q, want %d %.80q", method, path, status, got, wantStatus, wantBody)
		}
	}
	expect("POST", "/echo", []byte(`{"n":1}`), "k:1", 201, `Bearer tok|k:1|application/json|approvals_session=s|{"n":1}`)
	expect("GET", "/chunked", nil, "", 200, big)
	expect("GET", "/redirect", nil, "", 303, "<a href=\"/login\">See Other</a>.\n\n")
	expect("GET", "/empty", nil, "", 204, "")
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for four requests, want 1 (keep-alive)", n)
	}
	expect("GET", "/close", nil, "", 200, "bye")
	expect("POST", "/echo", []byte(`{}`), "", 201, `Bearer tok||application/json|approvals_session=s|{}`)
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections after Connection: close, want 2", n)
	}

	// A cancelled run ends a request at once, and the next one reconnects.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := c.do(cctx, "GET", "/empty", nil, ""); err == nil {
		t.Error("request on a cancelled context succeeded")
	}
	srv.CloseClientConnections()
	deadline := time.Now().Add(5 * time.Second)
	for {
		// The first request after the server dropped the connection may
		// fail; the client must then reconnect.
		if status, _, err := c.do(ctx, "GET", "/empty", nil, ""); err == nil && status == 204 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("client did not reconnect after the server closed its connection")
		}
	}
}

// TestBenchClientRefusesMalformedResponses: a peer that does not speak
// HTTP is a transport error, never a status.
func TestBenchClientRefusesMalformedResponses(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				buf := make([]byte, 4096)
				_, _ = conn.Read(buf)
				_, _ = io.WriteString(conn, "SSH-2.0-OpenSSH\r\n\r\n")
			}()
		}
	}()
	c, err := newBenchClient(benchConfig{URL: "http://" + ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	if status, _, err := c.do(t.Context(), "GET", "/", nil, ""); err == nil {
		t.Fatalf("malformed response gave status %d and no error", status)
	}
}

// TestBenchClientURL: a path in --url prefixes every request; https is
// refused (the client speaks plain HTTP only).
func TestBenchClientURL(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	c, err := newBenchClient(benchConfig{URL: srv.URL + "/base/"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	status, body, err := c.do(t.Context(), "GET", "/api/v1/tools", nil, "")
	if err != nil || status != 200 || string(body) != "/base/api/v1/tools" {
		t.Fatalf("GET: %d %q %v, want 200 /base/api/v1/tools", status, body, err)
	}
	if _, err := newBenchClient(benchConfig{URL: "https://127.0.0.1:8443"}); err == nil {
		t.Error("https URL accepted")
	}
}

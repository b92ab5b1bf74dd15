package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The HTTP floor: a server that answers the bench scenarios' requests with
// a stored action's shape and size but does nothing else (no JSON decoding,
// no token, no storage), on plain net/http. The load generator drives it
// like approvals serve, so its rate and CPU per operation are what HTTP
// alone costs on this machine: no HTTP API, approvals or another, can do
// better. scripts/bench uses it to bound the ratios its yardsticks allow
// (docs/performance.md).

// floorAction is an action as approvals answers it, with the same fields
// and about the same size.
func floorAction(state string) []byte {
	return []byte(`{"id":"01a23112-613e-75f7-a945-32ad818897d8","tool":"bench_unregistered","class":"at-most-once",` +
		`"intent_key":"bench:101010ab12cd34:new:1:1","attempt":1,"state":"` + state + `","payload":{"client":1,"n":1},` +
		`"approved_payload":null,"result":null,"error":null,"requested_by":"agent:bench","decided_by":null,` +
		`"decision_note":null,"created_at":"2026-12-01T10:06:57.854161Z","decided_at":null,"claimed_at":null,` +
		`"finished_at":null,"expires_at":"2026-12-04T10:06:57.854161Z","ticket":null,"warnings":[],` +
		`"approvals_required":1,"approvals":[],"edited_fields":null}` + "\n")
}

// floorHandler answers GET with 200; a submission with 201 (in_progress
// for the claim scenario's tool, else pending), or 200 for the replay
// scenario's keys; a completion with 200.
func floorHandler() http.Handler {
	pending, claimed, done := floorAction("pending"), floorAction("in_progress"), floorAction("done")
	tools := []byte(`{"tools":[]}` + "\n")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		status, out := http.StatusOK, pending
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/v1/tools":
			out = tools
		case r.Method == http.MethodGet:
		case strings.HasSuffix(r.URL.Path, "/complete"):
			out = done
		case bytes.Contains(body, []byte(`:replay:`)):
		case bytes.Contains(body, []byte(`"tool":"bench_exactly_once"`)):
			status, out = http.StatusCreated, claimed
		default:
			status = http.StatusCreated
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(out)))
		w.WriteHeader(status)
		_, _ = w.Write(out)
	})
}

// benchFloorServe serves the floor on addr (loopback only) until ctx ends
// or the process is interrupted.
func benchFloorServe(ctx context.Context, addr string, out io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
		return fmt.Errorf("--addr %q: the floor server listens on a loopback address only, such as 127.0.0.1:18300", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: floorHandler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(out, "floor server listening on http://%s\n", ln.Addr())
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

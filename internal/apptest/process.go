package apptest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/postgres/pgtest"
	"github.com/approvals/approvals/queue"
)

// BuildBinary builds the approvals command once for a test and its
// subtests, for the tests that run it as a process.
func BuildBinary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "approvals")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/approvals/approvals/cmd/approvals").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// DeploymentOptions say what a Deployment runs with.
type DeploymentOptions struct {
	// Tools is the tools file (YAML).
	Tools string
	// Env is added to every process's environment (APPROVALS_…).
	Env []string
	// DatabaseURL is the PostgreSQL database; default a fresh schema.
	DatabaseURL string
	// DomainTools are the tools of Domain's service; default none.
	DomainTools *classify.Registry
}

// Deployment is a PostgreSQL database with a tools file and the
// environment of the `approvals serve` processes that share them, as one
// deployment runs several of them behind a load balancer.
type Deployment struct {
	T   testing.TB
	Bin string
	// DatabaseURL is the deployment's database; Env its processes'
	// environment (DATABASE_URL and APPROVALS_TOOLS included).
	DatabaseURL string
	Env         []string
	// Token is the agent token of "bot", created with `approvals token create`.
	Token string

	domainTools *classify.Registry
	domainOnce  sync.Once
	domain      *Env
}

// NewDeployment writes the tools file, prepares the environment (the
// test's own APPROVALS_ and DATABASE_URL settings are left out) and creates
// the agent token "bot" with the binary.
func NewDeployment(t testing.TB, bin string, opts DeploymentOptions) *Deployment {
	t.Helper()
	tools := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(tools, []byte(opts.Tools), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &Deployment{T: t, Bin: bin, DatabaseURL: opts.DatabaseURL, domainTools: opts.DomainTools}
	if d.DatabaseURL == "" {
		d.DatabaseURL = pgtest.URL(t)
	}
	if d.domainTools == nil {
		d.domainTools = classify.Empty()
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "APPROVALS_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			d.Env = append(d.Env, kv)
		}
	}
	d.Env = append(d.Env, "DATABASE_URL="+d.DatabaseURL, "APPROVALS_TOOLS="+tools)
	d.Env = append(d.Env, opts.Env...)
	d.Token = strings.TrimSpace(d.Command("", "token", "create", "--name", "bot"))
	return d
}

// Domain is the test's own process on the deployment's database, without
// HTTP: it decides as staff would and reads what is stored. It opens on
// first use, so a deployment whose database the test crashes has none.
func (d *Deployment) Domain() *Env {
	d.domainOnce.Do(func() {
		d.domain = NewEnv(d.T, EnvOptions{DatabaseURL: d.DatabaseURL, Tools: d.domainTools,
			WaitRecheck: 2 * time.Second})
	})
	return d.domain
}

// Command runs one CLI command of the binary and returns its stdout; a
// failure fails the test with its stderr.
func (d *Deployment) Command(stdin string, args ...string) string {
	d.T.Helper()
	cmd := exec.Command(d.Bin, args...)
	cmd.Env = d.Env
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		d.T.Fatalf("approvals %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// Process is one running `approvals serve` process.
type Process struct {
	// URL is its base URL, such as http://127.0.0.1:41234.
	URL string
	Cmd *exec.Cmd
	// Exited is closed once the process has exited; Err then says how.
	Exited <-chan struct{}
	stderr *LogBuffer
	err    error
}

// Log is what the process has written to stderr so far.
func (p *Process) Log() string { return p.stderr.String() }

// Err is the process's exit, once Exited is closed.
func (p *Process) Err() error { return p.err }

// LogBuffer is a buffer that goroutines write (a log) while the test reads
// it.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Start runs a server process on a free port and waits until it is ready;
// t.Cleanup kills it and, when the test failed, logs what it wrote.
func (d *Deployment) Start() *Process {
	d.T.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		d.T.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	exited := make(chan struct{})
	p := &Process{URL: "http://" + addr, stderr: &LogBuffer{}, Exited: exited}
	p.Cmd = exec.Command(d.Bin, "serve")
	p.Cmd.Env = append(append([]string{}, d.Env...), "APPROVALS_ADDR="+addr)
	p.Cmd.Stderr = p.stderr
	if err := p.Cmd.Start(); err != nil {
		d.T.Fatal(err)
	}
	go func() {
		p.err = p.Cmd.Wait()
		close(exited)
	}()
	d.T.Cleanup(func() {
		_ = p.Cmd.Process.Kill()
		<-exited
		if d.T.Failed() {
			d.T.Logf("server %s log:\n%s", p.URL, p.Log())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(p.URL + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-exited:
			d.T.Fatalf("server exited at start: %v\n%s", p.err, p.Log())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.T.Fatalf("server not ready: %v\n%s", err, p.Log())
		}
	}
}

// Submit submits payload to tool through p's REST API as agent "bot" and
// fails the test unless that creates an action.
func (d *Deployment) Submit(p *Process, tool string, payload map[string]any) queue.Action {
	d.T.Helper()
	body, _ := json.Marshal(map[string]any{"tool": tool, "payload": payload})
	req, _ := http.NewRequest("POST", p.URL+"/api/v1/actions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+d.Token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		d.T.Fatal(err)
	}
	defer res.Body.Close()
	var a queue.Action
	b, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(b, &a); err != nil || res.StatusCode != http.StatusCreated {
		d.T.Fatalf("submit: %d %s", res.StatusCode, b)
	}
	return a
}

// Approve approves the action as Approver, through Domain.
func (d *Deployment) Approve(id string) {
	d.T.Helper()
	Approve(d.T, d.Domain().Service, id)
}

// Action reads the action as stored.
func (d *Deployment) Action(id string) *queue.Action {
	d.T.Helper()
	a, err := d.Domain().Store.ActionGetByID(context.Background(), id)
	if err != nil {
		d.T.Fatal(err)
	}
	return a
}

// Events lists the kinds of the action's events, oldest first.
func (d *Deployment) Events(id string) []string {
	d.T.Helper()
	evs, err := queue.Timeline(context.Background(), d.Domain().Store, id)
	if err != nil {
		d.T.Fatal(err)
	}
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev.Kind)
	}
	return kinds
}

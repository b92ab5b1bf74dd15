package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/handlers"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/internal/testclock"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/storage"
	"github.com/approvals/approvals/web/problem"
)

// apiEnv is one database shared by one or more server processes
// (apptest), as several `approvals serve` processes would share it.
type apiEnv struct {
	t      *testing.T
	app    *apptest.App // the first server
	dbURL  string
	store  storage.Store
	svc    *queue.Service
	reg    *classify.Registry
	base   string // the first server
	token  string // agent "bot"
	client *http.Client
	*testclock.Clock
}

// startAPI starts a server on a fresh PostgreSQL schema.
func startAPI(t *testing.T) *apiEnv {
	t.Helper()
	return startAPIWith(t, apptest.Options{})
}

// startAPISQLite starts a server on a fresh SQLite file, the embedded
// default.
func startAPISQLite(t *testing.T) *apiEnv {
	t.Helper()
	return startAPIWith(t, apptest.Options{SQLite: true})
}

// apiStores starts one API server per store, for the rules that must hold
// on both.
var apiStores = []struct {
	name  string
	start func(*testing.T) *apiEnv
}{{"postgres", startAPI}, {"sqlite", startAPISQLite}}

// startAPIWith starts a server with opts.
func startAPIWith(t *testing.T, opts apptest.Options) *apiEnv {
	t.Helper()
	a := apptest.Start(t, opts)
	e := &apiEnv{t: t, app: a, dbURL: a.DatabaseURL, store: a.Store, svc: a.Service, reg: a.Service.Registry(),
		base: a.URL, Clock: a.Clock,
		client: &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 200}}}
	e.token = a.Token(t, "bot")
	return e
}

// addServer starts another server process (its own pool and LISTEN
// connection) on the same PostgreSQL database.
func (e *apiEnv) addServer() string {
	return e.app.AddServer(e.t, nil).URL
}

func (e *apiEnv) newToken(name string) string {
	tok, hash := accounts.NewToken()
	if _, err := e.store.TokenCreate(context.Background(), accounts.TokenCreateParams{Name: name, Hash: hash, Now: time.Now()}); err != nil {
		e.t.Fatal(err)
	}
	return tok
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) action(t testing.TB) queue.Action {
	t.Helper()
	var a queue.Action
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatalf("decode action from %s: %v", r.body, err)
	}
	return a
}

func (r resp) problem(t testing.TB) problem.Details {
	t.Helper()
	var p problem.Details
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("decode problem from %s: %v", r.body, err)
	}
	return p
}

// do sends a request as the agent holding token and validates the
// response against the served OpenAPI document.
func (e *apiEnv) do(base, token, method, path string, body any, hdr ...string) resp {
	e.t.Helper()
	r, err := e.try(base, token, method, path, body, hdr...)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *apiEnv) try(base, token, method, path string, body any, hdr ...string) (resp, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return resp{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := e.client.Do(req)
	if err != nil {
		return resp{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return resp{}, err
	}
	out := resp{status: res.StatusCode, header: res.Header, body: b}
	if err := validateResponse(method, path, out); err != nil {
		return out, fmt.Errorf("%s %s → %d %s: %w", method, path, out.status, out.body, err)
	}
	return out, nil
}

var (
	openapiOnce sync.Once
	openapiDoc  map[string]any
	schemaMu    sync.Mutex
	schemas     = map[string]*jsonschema.Schema{}
	compiler    *jsonschema.Compiler
)

// validateResponse checks a response against handlers.OpenAPIDocument: the
// status must be documented for the operation and the body must match the
// schema of its content type.
func validateResponse(method, path string, r resp) error {
	openapiOnce.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(handlers.OpenAPIDocument))
		if err != nil {
			panic(err)
		}
		openapiDoc = doc.(map[string]any)
		compiler = jsonschema.NewCompiler()
		if err := compiler.AddResource("openapi.json", doc); err != nil {
			panic(err)
		}
	})
	tmpl := pathTemplate(path)
	paths := openapiDoc["paths"].(map[string]any)
	item, ok := paths[tmpl].(map[string]any)
	if !ok {
		return fmt.Errorf("path %s is not in the OpenAPI document", tmpl)
	}
	op, ok := item[strings.ToLower(method)].(map[string]any)
	if !ok {
		return fmt.Errorf("%s %s is not in the OpenAPI document", method, tmpl)
	}
	status := fmt.Sprint(r.status)
	rs, ok := op["responses"].(map[string]any)[status].(map[string]any)
	if !ok {
		return fmt.Errorf("status %s of %s %s is not documented", status, method, tmpl)
	}
	ct, _, _ := mime.ParseMediaType(r.header.Get("Content-Type"))
	content, _ := rs["content"].(map[string]any)
	if _, ok := content[ct]; !ok {
		return fmt.Errorf("content type %q of %s %s %s is not documented", ct, method, tmpl, status)
	}
	ptr := "openapi.json#/paths/" + escapePointer(tmpl) + "/" + strings.ToLower(method) + "/responses/" + status + "/content/" + escapePointer(ct) + "/schema"
	schemaMu.Lock()
	sch, ok := schemas[ptr]
	if !ok {
		var err error
		sch, err = compiler.Compile(ptr)
		if err != nil {
			schemaMu.Unlock()
			return fmt.Errorf("compile %s: %w", ptr, err)
		}
		schemas[ptr] = sch
	}
	schemaMu.Unlock()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.body))
	if err != nil {
		return fmt.Errorf("body is not JSON: %w", err)
	}
	return sch.Validate(v)
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// pathTemplate maps a concrete path to its OpenAPI template.
func pathTemplate(path string) string {
	path, _, _ = strings.Cut(path, "?")
	parts := strings.Split(path, "/")
	// /api/v1/actions/{id}[/verb]
	if len(parts) >= 5 && parts[3] == "actions" {
		parts[4] = "{id}"
	}
	return strings.Join(parts, "/")
}

// barrier releases n goroutines at once and collects their results.
func runConcurrently[T any](n int, fn func(i int) T) []T {
	start := make(chan struct{})
	out := make([]T, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			out[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return out
}

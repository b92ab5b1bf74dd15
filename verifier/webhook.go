// Package verifier asks a tool's system of record whether an action's
// effect happened (docs/verifiers.md): a signed webhook, or a read-only
// tool of an upstream MCP server. It is the queue.VerifyAsker the Service
// judges the answers of; it only fetches them.
package verifier

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/tracing"
	"github.com/approvals/approvals/webhooksign"
)

// Config configures an Asker.
type Config struct {
	// Client sends the webhook requests; it must not follow redirects
	// (default: a client that does not).
	Client *http.Client
	// Secret is APPROVALS_WEBHOOK_SECRET: verifier requests are signed as
	// executions are, with the executor's key (a tool's executor.secret
	// when it has one), never a channel's.
	Secret string
	// Upstream calls an upstream MCP server's tool (the gateway's
	// manager); nil: upstream verifiers answer unknown.
	Upstream UpstreamCaller
	// Refuse, when set, says why the named tool's upstream verifier must
	// not be called now: tools check's read-only check
	// (classify.Registry.VerifierUpstreamProblem) against the upstream's
	// listing as it is at the call, so that a tool which is missing or
	// not read-only is never called, whenever its upstream (re)connected.
	// Such a check answers unknown, saying why.
	Refuse func(tool string) error
}

// UpstreamCaller calls one tool of an upstream MCP server and returns its
// structured content (else its text), or an error.
type UpstreamCaller interface {
	CallRead(ctx context.Context, upstream, tool string, args map[string]any) (json.RawMessage, error)
}

// Asker is the queue.VerifyAsker of a server process.
type Asker struct {
	cfg     Config
	client  *http.Client
	signer  *webhooksign.Signer
	mu      sync.Mutex
	signers map[string]*webhooksign.Signer
}

var _ queue.VerifyAsker = (*Asker)(nil)

// New returns an Asker; an invalid secret is an error.
func New(cfg Config) (*Asker, error) {
	a := &Asker{cfg: cfg, client: cfg.Client, signers: map[string]*webhooksign.Signer{}}
	if a.client == nil {
		a.client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if cfg.Secret != "" {
		s, err := webhooksign.New(cfg.Secret)
		if err != nil {
			return nil, err
		}
		a.signer = s
	}
	return a, nil
}

// Ask implements queue.VerifyAsker.
func (a *Asker) Ask(ctx context.Context, t classify.Tool, q queue.VerifyQuestion) (json.RawMessage, error) {
	v := t.Verify
	if v == nil {
		return nil, fmt.Errorf("tool %s has no verifier", t.Name)
	}
	if v.Upstream != "" {
		return a.askUpstream(ctx, t.Name, v, q)
	}
	signer, err := a.signerFor(t)
	if err != nil {
		return nil, err
	}
	// The request is a client span of the check's, and its traceparent
	// lets the system of record continue the trace.
	ctx, span := tracing.Start(ctx, "POST", trace.WithSpanKind(trace.SpanKindClient))
	status := 0
	defer func() {
		if span.IsRecording() {
			if status != 0 {
				span.SetAttributes(attribute.Int("http.response.status_code", status))
			}
			if status < 200 || status > 299 {
				span.SetStatus(codes.Error, "")
			}
		}
		span.End()
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.Webhook, bytes.NewReader(q.Body))
	if err != nil {
		return nil, err
	}
	if span.IsRecording() {
		// Not the URL's path or query: a webhook's path is often its secret.
		span.SetAttributes(attribute.String("http.request.method", http.MethodPost),
			attribute.String("url.scheme", req.URL.Scheme), attribute.String("server.address", req.URL.Hostname()),
			attribute.String("approvals.action.id", q.Action.ID), attribute.Int("approvals.attempt", q.Action.Attempt))
		tracing.Inject(ctx, req.Header)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "approvals-verifier")
	req.Header.Set("X-Approvals-Action", q.Action.ID)
	req.Header.Set("X-Approvals-Attempt", strconv.Itoa(q.Action.Attempt))
	// Each request is a message of its own (its own webhook-id); the
	// timestamp is wall time, which the receiver compares with its clock.
	signer.SetHeaders(req.Header, q.MessageID, time.Now(), q.Body)
	res, err := a.client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, errors.New("timed out: " + classify.RedactURLsIn(err.Error()))
		}
		return nil, errors.New(classify.RedactURLsIn(err.Error()))
	}
	defer res.Body.Close()
	status = res.StatusCode
	body, err := io.ReadAll(io.LimitReader(res.Body, queue.MaxVerifyAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %s", classify.RedactURLsIn(err.Error()))
	}
	// What it said is kept as the check's evidence (capped at 64 KiB) even
	// when it proves nothing.
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return body, fmt.Errorf("status %d: %s", res.StatusCode, queue.Excerpt(body, 512))
	}
	if len(body) > queue.MaxVerifyAnswer {
		return body, fmt.Errorf("the answer is longer than %d bytes", queue.MaxVerifyAnswer)
	}
	return body, nil
}

// signerFor is the executor's key of the tool: its own secret, else
// APPROVALS_WEBHOOK_SECRET.
func (a *Asker) signerFor(t classify.Tool) (*webhooksign.Signer, error) {
	if t.Executor == nil || t.Executor.Secret == "" {
		if a.signer == nil {
			return nil, errors.New("nothing was sent: no secret to sign the request with")
		}
		return a.signer, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.signers[t.Executor.Secret]; s != nil {
		return s, nil
	}
	s, err := webhooksign.New(t.Executor.Secret)
	if err != nil {
		return nil, err
	}
	a.signers[t.Executor.Secret] = s
	return s, nil
}

// askUpstream calls the verifier's upstream tool with its arguments'
// templates filled from the payload.
func (a *Asker) askUpstream(ctx context.Context, tool string, v *classify.Verify, q queue.VerifyQuestion) (json.RawMessage, error) {
	if a.cfg.Upstream == nil {
		return nil, fmt.Errorf("this server has no connection to upstream %s", v.Upstream)
	}
	if a.cfg.Refuse != nil {
		if err := a.cfg.Refuse(tool); err != nil {
			return nil, fmt.Errorf("verifier disabled, not called: %w", err)
		}
	}
	args := map[string]any{}
	for name, tmpl := range v.Arguments {
		s, err := classify.RenderTemplate(tmpl, q.Payload)
		if err != nil {
			return nil, fmt.Errorf("argument %s: %w", name, err)
		}
		args[name] = s
	}
	return a.cfg.Upstream.CallRead(ctx, v.Upstream, v.Tool, args)
}

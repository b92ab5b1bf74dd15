package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

// Webhook delivers approved actions of webhook tools. Every server process
// runs one; the claim (approved → in_progress) is one conditional update,
// so each action is delivered by exactly one of them, and it is committed
// before the first byte is sent, so a crash can lose an outcome but never
// cause a second delivery. Only approved actions are claimed: nothing
// in_progress is ever sent again, by this or any other process.
type Webhook struct {
	*loop
	client *http.Client
	signer *webhooksign.Signer // APPROVALS_WEBHOOK_SECRET; nil: only tools with their own secret are sent
	cfg    WebhookConfig

	mu      sync.Mutex
	signers map[string]*webhooksign.Signer // by executor secret
}

// WebhookConfig configures a Webhook dispatcher.
type WebhookConfig struct {
	// Client sends deliveries; its redirect policy is replaced so that no
	// redirect is followed. Default: a client over a clone of
	// http.DefaultTransport. Each delivery is bounded by its tool's
	// executor timeout.
	Client *http.Client
	// Secret signs every delivery as Standard Webhooks say
	// (APPROVALS_WEBHOOK_SECRET: "whsec_" and base64, or raw bytes),
	// except a tool's whose executor names its own secret. Without either
	// the dispatcher claims nothing: an unsigned delivery is never sent.
	Secret string
	// Logger, default slog.Default().
	Logger *slog.Logger
	// OnOutcome observes each delivery's outcome (done, failed, unknown),
	// for metrics.
	OnOutcome func(outcome string)
	// Recheck is the slow timed scan for approved actions whose
	// notification was missed. Default 10s.
	Recheck time.Duration
	// Concurrency caps deliveries under way in this process. Default 32.
	Concurrency int
}

// Delivery outcomes, as passed to OnOutcome.
const (
	DeliveryDone    = queue.ExecutionDone
	DeliveryFailed  = queue.ExecutionFailed
	DeliveryUnknown = queue.ExecutionUnknown
)

// refusedStatuses are the answers that say the receiver did not act on the
// request; any other non-2xx answer leaves the outcome unknown.
var refusedStatuses = map[int]bool{400: true, 401: true, 403: true, 404: true, 405: true,
	410: true, 413: true, 415: true, 422: true}

// NewWebhook returns a webhook dispatcher of svc. A secret that is not
// usable (a "whsec_" secret whose rest is not base64) is an error, so a
// typo stops the server at start instead of leaving deliveries unsigned.
func NewWebhook(svc *queue.Dispatch, cfg WebhookConfig) (*Webhook, error) {
	var signer *webhooksign.Signer
	if cfg.Secret != "" {
		s, err := webhooksign.New(cfg.Secret)
		if err != nil {
			return nil, fmt.Errorf("APPROVALS_WEBHOOK_SECRET: %w", err)
		}
		signer = s
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = 10 * time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 32
	}
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	if cfg.Client != nil {
		c := *cfg.Client
		client = &c
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	d := &Webhook{client: client, signer: signer, cfg: cfg, signers: map[string]*webhooksign.Signer{}}
	d.loop = newLoop(svc, cfg.Logger, d, (*queue.Action).HasWebhook, cfg.Recheck, cfg.Concurrency, cfg.OnOutcome)
	// One that cannot be signed is left approved, never claimed.
	d.loop.ready = func(a *queue.Action) bool { return d.signerFor(a) != nil }
	return d, nil
}

// signerFor is the signer of a's delivery: its tool's own executor secret, as the tools file
// in force names it for the same webhook (secrets never reach an action's snapshot), else
// APPROVALS_WEBHOOK_SECRET's; nil when there is neither.
func (d *Webhook) signerFor(a *queue.Action) *webhooksign.Signer {
	t, ok := d.svc.Registry().Lookup(a.Tool)
	if !ok || t.Executor == nil || t.Executor.Secret == "" || a.Spec.Executor == nil || t.Executor.Webhook != a.Spec.Executor.Webhook {
		return d.signer
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.signers[t.Executor.Secret]; ok {
		return s
	}
	s, err := webhooksign.New(t.Executor.Secret)
	if err != nil {
		return nil // the tools file refuses such a secret
	}
	d.signers[t.Executor.Secret] = s
	return s
}

// Run claims and delivers approved webhook actions until ctx ends: once at
// start (actions approved while no process ran), on every change to
// approved, and on a slow timer. When ctx ends it claims nothing more and
// returns once the deliveries under way have finished; they run on a
// context detached from ctx, bounded by their own timeout.
func (d *Webhook) Run(ctx context.Context) {
	if d.signer == nil && !d.ownSecrets() {
		d.log.Info("webhook dispatcher off: APPROVALS_WEBHOOK_SECRET is not set and no executor has a secret of its own, and deliveries are never sent unsigned")
		return
	}
	if d.signer == nil {
		d.log.Info("webhook dispatcher: APPROVALS_WEBHOOK_SECRET is not set, so only tools with their own executor secret are delivered")
	}
	d.loop.run(ctx)
}

// ownSecrets reports whether a tool of the tools file signs with a secret of its own (the
// file's executors do not change while the process runs).
func (d *Webhook) ownSecrets() bool {
	for _, t := range d.svc.Registry().Tools() {
		if t.Executor != nil && t.Executor.Secret != "" {
			return true
		}
	}
	return false
}

// Scan does once what Run does at start and on its timer: it offers every
// approved webhook action to a delivery slot, then waits until the
// deliveries it started have finished. Run need not be running; without a
// secret it claims nothing.
func (d *Webhook) Scan(ctx context.Context) {
	if d.signer == nil && !d.ownSecrets() {
		return
	}
	d.loop.scanAll(ctx)
}

// Channel names the webhook executor in events.
func (d *Webhook) Channel() string { return "webhook" }

// Target is the webhook URL.
func (d *Webhook) Target(a *queue.Action) map[string]any {
	return map[string]any{"webhook": classify.RedactURL(a.Spec.Executor.Webhook)}
}

// Do POSTs the approved payload once, signed, and reads what the answer
// says: 2xx done, a refusal failed, anything else unknown. It is bounded by
// the tool's executor timeout, not by the worker's context: a delivery
// under way finishes during shutdown.
func (d *Webhook) Do(ctx context.Context, a *queue.Action) queue.Execution {
	info := d.Target(a)
	signer := d.signerFor(a)
	if signer == nil {
		// The tools file changed between the claim and now: nothing is sent unsigned.
		return queue.Execution{Outcome: queue.ExecutionFailed, Details: info, Error: "nothing was sent: no secret to sign the delivery with"}
	}
	status, body, err := d.post(ctx, a, signer)
	if status != 0 {
		info["status"] = status
	}
	if err != nil {
		info["error"] = describeDeliveryError(err)
	}
	switch {
	case status >= 200 && status < 300:
		// The receiver said it acted; a body cut short changes nothing.
		return queue.Execution{Outcome: queue.ExecutionDone, Result: queue.ResultOf(body), Details: info}
	case refusedStatuses[status]:
		info["body"] = queue.Excerpt(body, 1024)
		return queue.Execution{Outcome: queue.ExecutionFailed, Details: info,
			Error: fmt.Sprintf("the receiver refused it with status %d", status)}
	}
	// Other statuses, redirects, timeouts, connection errors.
	if status != 0 {
		info["body"] = queue.Excerpt(body, 1024)
		if status >= 300 && status < 400 {
			info["note"] = "redirects are not followed"
		}
	}
	return queue.Execution{Outcome: queue.ExecutionUnknown, Details: info}
}

// post sends one delivery. status is 0 when no response arrived; body is
// at most queue.MaxResultBody+1 bytes of the response; err says why no usable
// response arrived.
func (d *Webhook) post(tctx context.Context, a *queue.Action, signer *webhooksign.Signer) (status int, body []byte, err error) {
	hook := a.Spec.Executor
	timeout := hook.Timeout
	if timeout <= 0 {
		timeout = min(30*time.Second, a.Spec.ClaimTimeout/2)
	}
	ctx, cancel := detached(timeout)
	defer cancel()
	// The delivery attempt is a client span of the execution's trace, and
	// its traceparent header lets the receiver continue it.
	ctx, span := tracing.Start(trace.ContextWithSpan(ctx, trace.SpanFromContext(tctx)), "POST",
		trace.WithSpanKind(trace.SpanKindClient))
	defer func() {
		if span.IsRecording() {
			if status != 0 {
				span.SetAttributes(attribute.Int("http.response.status_code", status))
			}
			if status == 0 || status >= 400 {
				span.SetStatus(codes.Error, "")
			}
		}
		span.End()
	}()
	payload := []byte(a.ApprovedPayload)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.Webhook, bytes.NewReader(payload))
	if err != nil {
		return 0, nil, err
	}
	if span.IsRecording() {
		// Not the URL's path or query: a webhook's path is often its secret.
		span.SetAttributes(attribute.String("http.request.method", http.MethodPost),
			attribute.String("url.scheme", req.URL.Scheme),
			attribute.String("server.address", req.URL.Hostname()),
			attribute.String("approvals.action.id", a.ID), attribute.Int("approvals.attempt", a.Attempt))
		if p := req.URL.Port(); p != "" {
			if n, err := strconv.Atoi(p); err == nil {
				span.SetAttributes(attribute.Int("server.port", n))
			}
		}
		tracing.Inject(ctx, req.Header)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "approvals-dispatcher")
	req.Header.Set("Idempotency-Key", a.IntentKey)
	req.Header.Set("X-Approvals-Action", a.ID)
	req.Header.Set("X-Approvals-Attempt", strconv.Itoa(a.Attempt))
	// The action id is the message id, so a receiver that dedupes on
	// webhook-id sees one message per action. The timestamp is wall time,
	// not the service clock: the receiver compares it with its own clock
	// to refuse replays.
	signer.SetHeaders(req.Header, a.ID, time.Now(), payload)
	res, err := d.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	body, err = io.ReadAll(io.LimitReader(res.Body, queue.MaxResultBody+1))
	return res.StatusCode, body, err
}

// describeDeliveryError says in words why no response arrived.
func describeDeliveryError(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out: " + classify.RedactURLsIn(err.Error())
	}
	// Go's error names the URL, query credentials included.
	return classify.RedactURLsIn(err.Error())
}

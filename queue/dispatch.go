package queue

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/approvals/approvals/classify"
)

// Dispatcher delivers approved actions of webhook tools. Every server
// process runs one; the claim (approved → in_progress) is one conditional
// update, so each action is delivered by exactly one of them, and it is
// committed before the first byte is sent, so a crash can lose an outcome
// but never cause a second delivery. Only approved actions are claimed:
// nothing in_progress is ever sent again, by this or any other process.
type Dispatcher struct {
	svc    *Service
	client *http.Client
	secret []byte
	log    *slog.Logger
	cfg    DispatcherConfig
	slots  chan struct{}
	wg     sync.WaitGroup // deliveries under way

	// offered holds the actions this dispatcher has taken a slot for and
	// not finished: an approval's notification that arrives after a scan
	// already started its delivery is a duplicate, and waiting for a slot
	// for it would stall every other notification behind it.
	mu      sync.Mutex
	offered map[string]bool
}

// DispatcherConfig configure a Dispatcher.
type DispatcherConfig struct {
	// Client sends deliveries; its redirect policy is replaced so that no
	// redirect is followed. Default: a client over a clone of
	// http.DefaultTransport. Each delivery is bounded by its tool's
	// executor timeout.
	Client *http.Client
	// Secret signs every body (APPROVALS_WEBHOOK_SECRET). Without it the
	// dispatcher claims nothing: an unsigned delivery is never sent.
	Secret string
	// Logger, default the service's.
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
	DeliveryDone    = "done"
	DeliveryFailed  = "failed"
	DeliveryUnknown = "unknown"
)

// DispatcherActor is the claimed_by and the actor of the dispatcher's
// events.
const DispatcherActor = "dispatcher"

// MaxResultBody caps the stored response of a delivery.
const MaxResultBody = 64 << 10

// refusedStatuses are the answers that say the receiver did not act on the
// request; any other non-2xx answer leaves the outcome unknown.
var refusedStatuses = map[int]bool{400: true, 401: true, 403: true, 404: true, 405: true,
	410: true, 413: true, 415: true, 422: true}

// NewDispatcher returns a dispatcher over svc's store and clock.
func NewDispatcher(svc *Service, cfg DispatcherConfig) *Dispatcher {
	if cfg.Logger == nil {
		cfg.Logger = svc.log
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
	return &Dispatcher{svc: svc, client: client, secret: []byte(cfg.Secret), log: cfg.Logger, cfg: cfg,
		slots: make(chan struct{}, cfg.Concurrency), offered: map[string]bool{}}
}

// Run claims and delivers approved webhook actions until ctx ends: once at
// start (actions approved while no process ran), on every change to
// approved, and on a slow timer. When ctx ends it claims nothing more and
// returns once the deliveries under way have finished; they run on a
// context detached from ctx, bounded by their own timeout.
func (d *Dispatcher) Run(ctx context.Context) {
	defer d.wg.Wait()
	if len(d.secret) == 0 {
		d.log.Info("webhook dispatcher off: APPROVALS_WEBHOOK_SECRET is not set, and deliveries are never sent unsigned")
		return
	}
	// Subscribe before the first scan, so an approval between the two is
	// not missed.
	changes, cancel := d.svc.store.Subscribe()
	defer cancel()
	d.scan(ctx, nil)
	t := time.NewTicker(d.cfg.Recheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case c, ok := <-changes:
			if !ok { // the store is closing; the timer alone remains
				changes = nil
				continue
			}
			if c.State == StateApproved {
				d.consider(ctx, c.ActionID)
			}
		case <-t.C:
			d.scan(ctx, nil)
		}
	}
}

// Scan does once what Run does at start and on its timer: it offers every
// approved webhook action to a delivery slot, then waits until the
// deliveries it started have finished. Run need not be running; without a
// secret it claims nothing.
func (d *Dispatcher) Scan(ctx context.Context) {
	if len(d.secret) == 0 {
		return
	}
	var started sync.WaitGroup
	d.scan(ctx, &started)
	started.Wait()
}

// scan offers every approved webhook action to a delivery slot, oldest
// first. Each delivery it starts is added to started, when not nil.
func (d *Dispatcher) scan(ctx context.Context, started *sync.WaitGroup) {
	p := ActionListParams{State: StateApproved, Webhook: true, Oldest: true, Limit: 200}
	for ctx.Err() == nil {
		list, err := d.svc.store.ActionList(ctx, p)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("dispatcher: list approved actions", "err", err)
			}
			return
		}
		for _, a := range list {
			if !d.start(ctx, a, started) {
				return
			}
		}
		if len(list) < p.Limit {
			return
		}
		last := list[len(list)-1]
		p.After = &Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
}

// consider delivers one action that was just approved, if it belongs to a
// webhook tool.
func (d *Dispatcher) consider(ctx context.Context, id string) {
	a, err := d.svc.store.ActionGetByID(ctx, id)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("dispatcher: read approved action", "action", id, "err", err)
		}
		return
	}
	if a.State == StateApproved && a.HasWebhook() {
		d.start(ctx, a, nil)
	}
}

// start waits for a free slot, then claims and delivers a in the
// background. The slot is taken before the claim, so a claim's deadline
// never runs while it waits for a slot. It reports false when ctx ended.
// The delivery is added to started, when not nil.
func (d *Dispatcher) start(ctx context.Context, a *Action, started *sync.WaitGroup) bool {
	d.mu.Lock()
	dup := d.offered[a.ID]
	d.offered[a.ID] = true
	d.mu.Unlock()
	if dup {
		return true // already waiting for a slot or under way here
	}
	release := func() {
		d.mu.Lock()
		delete(d.offered, a.ID)
		d.mu.Unlock()
	}
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		release()
		return false
	}
	if ctx.Err() != nil {
		<-d.slots
		release()
		return false
	}
	if started != nil {
		started.Add(1)
	}
	d.wg.Go(func() {
		defer func() {
			release()
			<-d.slots
		}()
		if started != nil {
			defer started.Done()
		}
		d.claimAndDeliver(ctx, a)
	})
	return true
}

// detached is a context for work that must finish once begun (a claim, a
// delivery, its outcome), even while the server shuts down.
func detached(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

const storeTimeout = 10 * time.Second

// claimAndDeliver claims a unless worker has ended; once claimed, a is
// delivered and its outcome recorded whatever happens to worker.
func (d *Dispatcher) claimAndDeliver(worker context.Context, a *Action) {
	// The webhook URL needs no check here: loading the tools file refuses
	// any that is not an absolute http or https URL, and the action's
	// spec is a snapshot of a loaded tool.
	ctx, cancel := detached(storeTimeout)
	defer cancel()
	// Checked as late as possible: a shutdown that began while this
	// goroutine waited to run claims nothing.
	if worker.Err() != nil {
		return
	}
	a, ok := d.claim(ctx, a)
	if !ok {
		return
	}
	hook := a.Spec.Executor
	// Write-ahead: the delivery is on record before it starts, so the
	// actions with a delivery_started event and no outcome are exactly the
	// unknown ones.
	started, _ := json.Marshal(map[string]any{"webhook": classify.RedactURL(hook.Webhook), "attempt": a.Attempt, "idempotency_key": a.IntentKey})
	if err := d.svc.store.EventInsert(ctx, Event{ActionID: a.ID, Kind: EventDelivery, Actor: DispatcherActor,
		Channel: "webhook", At: d.svc.Now(), Data: started}); err != nil {
		// Nothing was sent, and nothing will be: the claim stays and
		// becomes a ticket, whose timeline shows no delivery started.
		d.log.Error("dispatcher: could not record the delivery start; not sending", "action", a.ID, "err", err)
		return
	}
	out := d.deliver(a)
	if d.cfg.OnOutcome != nil { // before the outcome is visible in the store
		d.cfg.OnOutcome(out.outcome)
	}
	d.record(a, out)
}

// claim moves a from approved to in_progress, committed before any byte is
// sent. Losing the race to another process is not an error.
func (d *Dispatcher) claim(ctx context.Context, a *Action) (*Action, bool) {
	now := d.svc.Now()
	by := DispatcherActor
	deadline := now.Add(a.Spec.ClaimTimeout)
	data, _ := json.Marshal(map[string]any{"webhook": classify.RedactURL(a.Spec.Executor.Webhook), "claim_deadline": deadline})
	got, err := d.svc.store.ActionTransition(ctx, ActionTransitionParams{
		ID: a.ID, From: []State{StateApproved}, To: StateInProgress, Now: now, Unexpired: true,
		ClaimedAt: &now, ClaimedBy: &by, ClaimDeadline: &deadline,
		Event: Event{ActionID: a.ID, Kind: EventClaimed, Actor: by, Channel: "webhook", At: now, Data: data},
	})
	switch {
	case errors.Is(err, ErrStateMismatch):
		if got != nil && got.State == StateApproved { // its approval expired before delivery
			if _, err := d.svc.expireOne(ctx, got, StateApproved); err == nil {
				d.log.Info("dispatcher: approval expired before delivery", "action", a.ID)
			}
		}
		return nil, false
	case err != nil:
		d.log.Warn("dispatcher: claim", "action", a.ID, "err", err)
		return nil, false
	}
	if !got.HasWebhook() || got.ApprovedPayload == nil {
		// Cannot happen for an approved webhook action; refuse to guess.
		d.log.Error("dispatcher: claimed action has no webhook or approved payload; leaving it for an operator", "action", a.ID)
		return nil, false
	}
	return got, true
}

// delivery is what one POST came to.
type delivery struct {
	outcome string // DeliveryDone, DeliveryFailed or DeliveryUnknown
	status  int    // 0 when no response arrived
	body    []byte // at most MaxResultBody+1 bytes of the response
	err     error  // why no usable response arrived
}

// deliver POSTs the approved payload once. It is bounded by the tool's
// executor timeout, not by the worker's context: a delivery under way
// finishes during shutdown.
func (d *Dispatcher) deliver(a *Action) delivery {
	hook := a.Spec.Executor
	timeout := hook.Timeout
	if timeout <= 0 {
		timeout = min(30*time.Second, a.Spec.ClaimTimeout/2)
	}
	ctx, cancel := detached(timeout)
	defer cancel()
	body := []byte(a.ApprovedPayload)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.Webhook, bytes.NewReader(body))
	if err != nil {
		return delivery{outcome: DeliveryUnknown, err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "approvals-dispatcher")
	req.Header.Set("Idempotency-Key", a.IntentKey)
	req.Header.Set("X-Approvals-Action", a.ID)
	req.Header.Set("X-Approvals-Attempt", strconv.Itoa(a.Attempt))
	req.Header.Set("X-Approvals-Signature", Sign(d.secret, body))
	res, err := d.client.Do(req)
	if err != nil {
		return delivery{outcome: DeliveryUnknown, err: err}
	}
	defer res.Body.Close()
	out := delivery{status: res.StatusCode}
	out.body, out.err = io.ReadAll(io.LimitReader(res.Body, MaxResultBody+1))
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		// The receiver said it acted; a body cut short changes nothing.
		out.outcome = DeliveryDone
	case refusedStatuses[res.StatusCode]:
		out.outcome = DeliveryFailed
	default: // other statuses and redirects
		out.outcome = DeliveryUnknown
	}
	return out
}

// Sign returns the X-Approvals-Signature of body: "sha256=" and the hex
// HMAC-SHA256 of the body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// record stores the outcome: done or failed with one conditional update, or
// for an unknown outcome an event only; the action stays in_progress and
// the sweep turns it into a ticket after claim_timeout. It retries briefly,
// because an outcome that is not recorded becomes an operator's question.
func (d *Dispatcher) record(a *Action, out delivery) {
	for try := range 3 {
		if try > 0 {
			time.Sleep(time.Duration(try) * time.Second)
		}
		ctx, cancel := detached(storeTimeout)
		err := d.recordOnce(ctx, a, out)
		cancel()
		if err == nil {
			return
		}
		d.log.Warn("dispatcher: record delivery outcome", "action", a.ID, "outcome", out.outcome, "err", err)
	}
	d.log.Error("dispatcher: the delivery outcome is lost; the action becomes a ticket after its claim_timeout",
		"action", a.ID, "outcome", out.outcome, "status", out.status)
}

func (d *Dispatcher) recordOnce(ctx context.Context, a *Action, out delivery) error {
	now := d.svc.Now()
	info := map[string]any{"webhook": classify.RedactURL(a.Spec.Executor.Webhook)}
	if out.status != 0 {
		info["status"] = out.status
	}
	if out.err != nil {
		info["error"] = describeDeliveryError(out.err)
	}
	p := ActionTransitionParams{ID: a.ID, From: []State{StateInProgress}, Now: now, FinishedAt: &now,
		ResolveStaleTicket: true}
	switch out.outcome {
	case DeliveryDone:
		result := responseResult(out.body)
		info["result"] = result
		p.To, p.Result = StateDone, result
		p.Event = Event{ActionID: a.ID, Kind: EventCompleted, Actor: DispatcherActor, Channel: "webhook", At: now}
	case DeliveryFailed:
		msg := fmt.Sprintf("the receiver refused it with status %d", out.status)
		info["body"] = excerpt(out.body, 1024)
		p.To, p.Error = StateFailed, &msg
		p.Event = Event{ActionID: a.ID, Kind: EventFailed, Actor: DispatcherActor, Channel: "webhook", At: now}
	default:
		if out.status != 0 {
			info["body"] = excerpt(out.body, 1024)
			if out.status >= 300 && out.status < 400 {
				info["note"] = "redirects are not followed"
			}
		}
		info["outcome"] = "unknown: the action stays in_progress, is never re-sent, and becomes a ticket after claim_timeout"
		data, _ := json.Marshal(info)
		d.log.Warn("dispatcher: delivery outcome unknown", "action", a.ID, "status", out.status, "err", info["error"])
		return d.svc.store.EventInsert(ctx, Event{ActionID: a.ID, Kind: EventDeliveryResult, Actor: DispatcherActor,
			Channel: "webhook", At: now, Data: data})
	}
	p.Event.Data, _ = json.Marshal(info)
	got, err := d.svc.store.ActionTransition(ctx, p)
	if errors.Is(err, ErrStateMismatch) && got != nil {
		// Someone settled it first: an operator after a ticket, which the
		// executor timeout (shorter than claim_timeout) should prevent.
		// Keep the receiver's answer on record, and flag a contradiction:
		// another state, or done with another result.
		if got.State == p.To && (p.To != StateDone || JSONEqual(got.Result, p.Result)) {
			return d.svc.store.EventInsert(ctx, Event{ActionID: a.ID, Kind: EventDeliveryResult, Actor: DispatcherActor,
				Channel: "webhook", At: now, Data: p.Event.Data})
		}
		info["report"], info["stored_state"] = out.outcome, got.State
		data, _ := json.Marshal(info)
		_, err = d.svc.store.TicketOpenConflict(ctx, a.ID, now, Event{ActionID: a.ID, Kind: EventOutcomeConflict,
			Actor: DispatcherActor, Channel: "webhook", At: now, Data: data})
		return err
	}
	return err
}

// responseResult is what a 2xx response stores as the action's result: a
// JSON body as it is, anything else (or a body over MaxResultBody, or JSON
// that PostgreSQL's jsonb cannot hold) as {"body": "<text>"}, cut at
// MaxResultBody.
func responseResult(body []byte) json.RawMessage {
	if len(body) <= MaxResultBody && json.Valid(body) {
		if v, ok := decodeValue(body); ok && !hasNUL(v) {
			// Re-encoding replaces invalid UTF-8 and lone surrogates, which
			// jsonb refuses.
			if b, err := json.Marshal(v); err == nil {
				return b
			}
		}
	}
	b, _ := json.Marshal(map[string]string{"body": excerpt(body, MaxResultBody)})
	return b
}

// excerpt returns at most n bytes of b as valid UTF-8 text without NUL
// characters, which jsonb cannot hold.
func excerpt(b []byte, n int) string {
	s := strings.ReplaceAll(strings.ToValidUTF8(string(b), "\uFFFD"), "\x00", "\uFFFD")
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}

func hasNUL(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.IndexByte(x, 0) >= 0
	case map[string]any:
		for k, w := range x {
			if strings.IndexByte(k, 0) >= 0 || hasNUL(w) {
				return true
			}
		}
	case []any:
		for _, w := range x {
			if hasNUL(w) {
				return true
			}
		}
	}
	return false
}

// describeDeliveryError says in words why no response arrived.
func describeDeliveryError(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out: " + classify.RedactURLsIn(err.Error())
	}
	// Go's error names the URL, query credentials included.
	return classify.RedactURLsIn(err.Error())
}

package executor

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/approvals/approvals/queue"
)

// loop is what every executor of approved actions runs: it offers each
// approved action its executor performs (wants) to a bounded number of
// slots, and each taken action is claimed, called and recorded by execute.
// Every server process runs one loop per executor; the claim is one
// conditional update, so each action is performed by exactly one of them.
type loop struct {
	svc   *queue.Dispatch
	log   *slog.Logger
	call  Call
	wants func(*queue.Action) bool
	// ready, when set, says whether an action of this executor can be
	// performed now; one that cannot is left approved (not claimed) for a
	// later scan.
	ready     func(*queue.Action) bool
	recheck   time.Duration
	onOutcome func(string)
	slots     chan struct{}
	wg        sync.WaitGroup // calls under way

	// offered holds the actions this loop has taken a slot for and not
	// finished: an approval's notification that arrives after a scan
	// already started its call is a duplicate, and waiting for a slot for
	// it would stall every other notification behind it.
	mu      sync.Mutex
	offered map[string]bool
}

func newLoop(svc *queue.Dispatch, log *slog.Logger, c Call, wants func(*queue.Action) bool, recheck time.Duration, concurrency int, onOutcome func(string)) *loop {
	return &loop{svc: svc, log: log, call: c, wants: wants, recheck: recheck, onOutcome: onOutcome,
		slots: make(chan struct{}, concurrency), offered: map[string]bool{}}
}

// run claims and performs approved actions until ctx ends: once at start
// (actions approved while no process ran), on every change to approved,
// and on a slow timer. When ctx ends it claims nothing more and returns
// once the calls under way have finished; they run on a context detached
// from ctx, bounded by their own timeout.
func (d *loop) run(ctx context.Context) {
	defer d.wg.Wait()
	// Subscribe before the first scan, so an approval between the two is
	// not missed.
	sub := d.svc.Subscribe()
	defer sub.Cancel()
	changes := sub.Changes
	// Actions approved within their submission change no state, so no
	// notification announces them; this process's own submissions do.
	// Another process's are this one's only at the rescan, unless that
	// process runs no executor of its own.
	atSub := d.svc.SubscribeApprovedAtSubmission()
	defer atSub.Cancel()
	submitted := atSub.Changes
	d.scan(ctx, nil)
	t := time.NewTicker(d.recheck)
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
			if c.State == queue.StateApproved {
				d.consider(ctx, c.ActionID)
			}
		case c, ok := <-submitted:
			if !ok {
				submitted = nil
				continue
			}
			d.consider(ctx, c.ActionID)
		case <-t.C:
			d.scan(ctx, nil)
		}
	}
}

// scanAll offers every approved action to a slot, then waits until the
// calls it started have finished.
func (d *loop) scanAll(ctx context.Context) {
	var started sync.WaitGroup
	d.scan(ctx, &started)
	started.Wait()
}

// scan offers every approved action of this executor to a slot, oldest
// first. Each call it starts is added to started, when not nil.
func (d *loop) scan(ctx context.Context, started *sync.WaitGroup) {
	const page = 200
	var after *queue.Cursor
	for ctx.Err() == nil {
		list, err := d.svc.Approved(ctx, after, page)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("dispatcher: list approved actions", "err", err)
			}
			return
		}
		for _, a := range list {
			if !d.offerable(a) {
				continue // another executor's, or not now
			}
			if !d.start(ctx, a, started) {
				return
			}
		}
		if len(list) < page {
			return
		}
		last := list[len(list)-1]
		after = &queue.Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
}

// consider performs one action that was just approved, if it is this
// executor's.
func (d *loop) consider(ctx context.Context, id string) {
	a, err := d.svc.Action(ctx, id)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("dispatcher: read approved action", "action", id, "err", err)
		}
		return
	}
	if a.State == queue.StateApproved && d.offerable(a) {
		d.start(ctx, a, nil)
	}
}

func (d *loop) offerable(a *queue.Action) bool {
	return d.wants(a) && (d.ready == nil || d.ready(a))
}

// start waits for a free slot, then claims and performs a in the
// background. The slot is taken before the claim, so a claim's deadline
// never runs while it waits for a slot. It reports false when ctx ended.
// The call is added to started, when not nil.
func (d *loop) start(ctx context.Context, a *queue.Action, started *sync.WaitGroup) bool {
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
		execute(ctx, d.svc, d.log, d.call, d.wants, a, d.onOutcome)
	})
	return true
}

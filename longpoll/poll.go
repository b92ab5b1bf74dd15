package longpoll

import (
	"context"
	"sync"
	"time"

	"github.com/approvals/approvals/queue"
)

// MaxWait caps a long-poll.
const MaxWait = 60 * time.Second

// A Poll is a long-poll under way: subscribed to its action's changes,
// with the action read and found in the state it waits to leave. It holds
// no goroutine: whoever waits calls Check when the poll's wake function
// runs or its Next time comes. Wait is the blocking form; the REST API
// waits on a hijacked connection instead, so ten thousand long-polls do
// not hold ten thousand goroutines and connection buffers.
type Poll struct {
	s        *Polls
	id       string
	until    queue.State
	sub      queue.Subscription
	wake     func()
	deadline time.Time
	recheck  time.Time
	once     sync.Once
}

// StartPoll subscribes to action id's changes, then reads it, so that a
// change between the two is not lost. It returns the action and no Poll
// when there is nothing to wait for: an error, d <= 0, a final state, or a
// state other than until (default: the state now). Otherwise it returns
// the Poll, whose wake is called, without blocking, on every change of the
// action, when the process begins to shut down and when the store's
// subscriptions close; the caller must Close the Poll.
func (s *Polls) StartPoll(ctx context.Context, id string, until queue.State, d time.Duration, wake func()) (*queue.Action, *Poll, error) {
	if d <= 0 { // a plain read: nothing to subscribe to
		a, err := s.store.ActionGetByID(ctx, id)
		return a, nil, err
	}
	sub := s.store.SubscribeAction(id, wake)
	a, err := s.store.ActionGetByID(ctx, id)
	if until == "" && err == nil {
		until = a.State
	}
	if err != nil || a.State.Final() || a.State != until {
		sub.Cancel()
		return a, nil, err
	}
	now := time.Now()
	p := &Poll{s: s, id: id, until: until, sub: sub, wake: wake,
		deadline: now.Add(d), recheck: now.Add(s.opts.WaitRecheck)}
	if !s.polls.add(p) { // shutting down: answer with what is stored
		sub.Cancel()
		return a, nil, nil
	}
	return a, p, nil
}

// Next is when Check must run if nothing wakes the poll first: its
// deadline, or its slow recheck (Options.WaitRecheck) if sooner.
func (p *Poll) Next() time.Time {
	if p.recheck.Before(p.deadline) {
		return p.recheck
	}
	return p.deadline
}

// Check says whether the poll is over and with which action: after a
// change of the action that left the awaited state, at shutdown, or at the
// deadline. A call when nothing happened (a wake for a change that kept
// the state, or too early) returns done false; the poll goes on. A true
// done, or an error, ends the poll's waiting; Close it then.
func (p *Poll) Check(ctx context.Context) (a *queue.Action, done bool, err error) {
	changed, closed := false, false
	select {
	case _, ok := <-p.sub.Changes:
		changed, closed = true, !ok
	default:
	}
	now := time.Now()
	switch {
	case closed, p.s.polls.stopping(), !now.Before(p.deadline):
		a, err = p.s.store.ActionGetByID(ctx, p.id)
		return a, true, err
	case !now.Before(p.recheck):
		// The last resort for a lost notification.
		p.recheck = now.Add(p.s.opts.WaitRecheck)
	case !changed:
		return nil, false, nil
	}
	a, err = p.s.store.ActionGetByID(ctx, p.id)
	if err != nil || a.State != p.until || a.State.Final() {
		return a, true, err
	}
	return nil, false, nil
}

// Close ends the poll: its subscription, its place among the waiters.
// It may be called more than once.
func (p *Poll) Close() {
	p.once.Do(func() {
		p.sub.Cancel()
		p.s.polls.remove(p)
	})
}

// Wait returns the action once its state differs from until (default: its
// state now), at once for a final state, or at the deadline; it returns
// ctx's error if ctx ends first. It blocks the calling goroutine; see Poll
// for the form that does not.
func (s *Polls) Wait(ctx context.Context, id string, until queue.State, d time.Duration) (*queue.Action, error) {
	if d <= 0 {
		return s.store.ActionGetByID(ctx, id)
	}
	w := NewWaker()
	a, p, err := s.StartPoll(ctx, id, until, d, w.Wake)
	if p == nil {
		return a, err
	}
	defer p.Close()
	return p.Wait(ctx, w)
}

// A Waker is the wake function of a Poll that a goroutine waits on.
type Waker chan struct{}

// NewWaker returns a Waker that remembers one wake.
func NewWaker() Waker { return make(Waker, 1) }

// Wake is the Poll's wake function; it never blocks.
func (w Waker) Wake() {
	select {
	case w <- struct{}{}:
	default:
	}
}

// Wait blocks until the poll is done (see Check) or ctx ends, woken by w,
// which must be (or be called by) the poll's wake function.
func (p *Poll) Wait(ctx context.Context, w Waker) (*queue.Action, error) {
	timer := time.NewTimer(time.Until(p.Next()))
	defer timer.Stop()
	for {
		select {
		case <-w:
		case <-timer.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		a, done, err := p.Check(ctx)
		if done || err != nil {
			return a, err
		}
		timer.Reset(time.Until(p.Next()))
	}
}

// Waiters is the number of long-polls now waiting for a change: subscribed,
// with the action read. A test (or an operator) sees a poll is held.
func (s *Polls) Waiters() int64 {
	s.polls.mu.Lock()
	defer s.polls.mu.Unlock()
	return int64(len(s.polls.polls))
}

// HoldWait counts a wait that has left its request's handler (a hijacked
// connection) until the function it returns is called, so that WaitPolls
// waits for it before its poll starts too. Call it in the handler: the
// HTTP server's Shutdown waits for handlers, so every HoldWait comes
// before the WaitPolls that follows it.
func (s *Polls) HoldWait() (done func()) {
	s.polls.wg.Add(1)
	return s.polls.wg.Done
}

// WaitPolls returns once every long-poll (and every HoldWait) has ended. Shutdown calls it
// after the HTTP server's, since the server does not count the polls it
// handed over (hijacked connections): they answer, as every poll does,
// once Options.Done closes, and must before the store closes.
func (s *Polls) WaitPolls() { s.polls.wg.Wait() }

// pollSet holds the polls under way, to wake each when shutdown begins.
type pollSet struct {
	mu     sync.Mutex
	polls  map[*Poll]struct{}
	closed bool
	wg     sync.WaitGroup
}

func (ps *pollSet) add(p *Poll) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return false
	}
	if ps.polls == nil {
		ps.polls = make(map[*Poll]struct{})
	}
	ps.polls[p] = struct{}{}
	ps.wg.Add(1)
	return true
}

func (ps *pollSet) remove(p *Poll) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if _, ok := ps.polls[p]; ok {
		delete(ps.polls, p)
		ps.wg.Done()
	}
}

func (ps *pollSet) stopping() bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.closed
}

// stop refuses new polls and wakes every poll under way.
func (ps *pollSet) stop() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.closed = true
	for p := range ps.polls {
		if p.wake != nil {
			p.wake()
		}
	}
}

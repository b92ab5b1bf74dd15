package queue

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// OutcomeKeepFor is how long an outcome that could not be written (the
// database away, a failover under way) is kept in memory and tried again.
// High-availability managers promote a standby within 10 to 30 seconds by
// default; ten minutes covers a slow one with room to spare.
const OutcomeKeepFor = 10 * time.Minute

// outcomeKeeper holds the outcomes this process learnt and could not write
// yet: a webhook delivery's answer, an upstream call's result, an agent's
// complete or fail. Each is tried again, with backoff, until it is written,
// refused for good (a domain error: it was settled otherwise, which the
// write itself records), or OutcomeKeepFor has passed. Without it an
// answered delivery became a ticket for a person after any outage longer
// than three seconds.
type outcomeKeeper struct {
	log  *slog.Logger
	mu   sync.Mutex
	kept map[*keptOutcome]struct{}
	wg   sync.WaitGroup
}

type keptOutcome struct {
	action, what string
	write        func(context.Context) error
	now          chan struct{} // closed by flush: try at once
}

func newOutcomeKeeper(log *slog.Logger) *outcomeKeeper {
	return &outcomeKeeper{log: log, kept: map[*keptOutcome]struct{}{}}
}

// keepWriteTimeout bounds one try of a kept write.
const keepWriteTimeout = 10 * time.Second

// transient reports whether err may pass when the database answers again:
// anything but a domain error (a refusal, which trying again repeats).
func transient(err error) bool {
	var qe *Error
	return err != nil && !errors.As(err, &qe) && !errors.Is(err, ErrStateMismatch)
}

// keep tries write again in the background until it passes. Each try's
// context has base's values (an agent's token guard) and a deadline of its
// own.
func (k *outcomeKeeper) keep(base context.Context, action, what string, write func(context.Context) error) {
	o := &keptOutcome{action: action, what: what, write: write, now: make(chan struct{})}
	k.mu.Lock()
	k.kept[o] = struct{}{}
	k.mu.Unlock()
	k.log.Warn("outcome kept: the database did not answer; it is written once it does", "action", action, "outcome", what, "for", OutcomeKeepFor)
	k.wg.Go(func() {
		defer func() {
			k.mu.Lock()
			delete(k.kept, o)
			k.mu.Unlock()
		}()
		until := time.Now().Add(OutcomeKeepFor)
		wait := 250 * time.Millisecond
		flushed := false
		for {
			if !flushed {
				select {
				case <-time.After(wait):
				case <-o.now:
					flushed = true
				}
			}
			ctx, cancel := context.WithTimeout(base, keepWriteTimeout)
			err := write(ctx)
			cancel()
			if !transient(err) {
				if err != nil {
					k.log.Info("kept outcome settled otherwise", "action", action, "outcome", what, "err", err)
				} else {
					k.log.Info("kept outcome written", "action", action, "outcome", what)
				}
				return
			}
			if flushed || time.Now().After(until) {
				k.log.Error("kept outcome lost: the database did not answer; the action becomes a ticket after its claim_timeout",
					"action", action, "outcome", what, "err", err)
				return
			}
			wait = min(wait*2, 5*time.Second)
		}
	})
}

// flush tries every kept outcome once more now and waits for those tries,
// or until ctx ends.
func (k *outcomeKeeper) flush(ctx context.Context) {
	k.mu.Lock()
	for o := range k.kept {
		select {
		case <-o.now:
		default:
			close(o.now)
		}
	}
	k.mu.Unlock()
	done := make(chan struct{})
	go func() { k.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		k.mu.Lock()
		for o := range k.kept {
			k.log.Error("kept outcome lost at shutdown", "action", o.action, "outcome", o.what)
		}
		k.mu.Unlock()
	}
}

// keepUnwritten keeps write when err, its first try's error, says the
// database did not answer: it is tried again in the background, while the
// caller still hears err (an agent's SDK tries again too, and a replayed
// outcome is answered as such). The request's values go with it; its
// cancellation does not.
func (s *Service) keepUnwritten(ctx context.Context, err error, action, what string, write func(context.Context) error) {
	if transient(err) {
		s.keep.keep(context.WithoutCancel(ctx), action, what, write)
	}
}

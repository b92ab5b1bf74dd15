package postgres

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/approvals/approvals/queue"
)

// announcer tells every process of the actions that moved: the process
// that moved them at once, through its hub, and the others with one NOTIFY
// transaction a batch, sent after the moves committed.
//
// Until migration 00028 a trigger on actions sent the NOTIFY inside the
// moving transaction. PostgreSQL holds one lock over the notification
// queue from a notifying transaction's pre-commit until its commit is
// flushed, so every completion's commit (its WAL flush included) ran one
// after another: the claim cycle ran 293-566/s with the trigger against
// 1,413-1,605/s without it on the same cluster (docs/performance.md, round
// 4). A transaction that only notifies writes no WAL and commits without
// waiting for a flush, so sending the notifications after the commit, many
// in one transaction, holds that lock for a moment instead of a flush.
//
// What a process misses is not lost: the announcement is a wake-up, not
// the change (waiters re-read the action), every long-poll also re-reads
// on a timer, and a listener that reconnects wakes every long-poll. If this
// process dies between the commit and its announcement, or cannot reach
// the database to send it, the other processes' waiters see the move at
// their next re-read.
type announcer struct {
	connConfig *pgx.ConnConfig
	channel    string
	hub        *queue.Hub
	log        *slog.Logger

	mu      sync.Mutex
	pending []string // "id:state", the payload the listeners read
	wake    chan struct{}
	done    chan struct{}

	// pid is the backend of the connection announcing, so that this
	// process's listener skips what it already published (0: none).
	pid atomic.Uint32
}

// maxAnnounce bounds one NOTIFY transaction; more wait for the next.
const maxAnnounce = 1000

func newAnnouncer(cfg *pgx.ConnConfig, channel string, hub *queue.Hub, log *slog.Logger) *announcer {
	return &announcer{connConfig: cfg, channel: channel, hub: hub, log: log,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// moved announces committed moves: call it after the commit, with the
// actions as they now are. Nil actions are skipped.
func (an *announcer) moved(actions ...*queue.Action) {
	an.mu.Lock()
	for _, a := range actions {
		if a == nil {
			continue
		}
		an.hub.Publish(queue.Change{ActionID: a.ID, State: a.State})
		an.pending = append(an.pending, a.ID+":"+string(a.State))
	}
	an.mu.Unlock()
	select {
	case an.wake <- struct{}{}:
	default:
	}
}

// run sends the announcements until ctx ends, then what is left for up to
// a second.
func (an *announcer) run(ctx context.Context) {
	defer close(an.done)
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
	}()
	send := func(ctx context.Context) {
		for {
			an.mu.Lock()
			n := min(len(an.pending), maxAnnounce)
			batch := an.pending[:n:n]
			an.pending = an.pending[n:]
			an.mu.Unlock()
			if n == 0 {
				return
			}
			if conn == nil || conn.IsClosed() {
				c, err := pgx.ConnectConfig(ctx, an.connConfig)
				if err != nil {
					an.log.Debug("announcing moved actions: connect", "err", err, "dropped", n)
					return
				}
				conn = c
				an.pid.Store(c.PgConn().PID())
			}
			// One transaction: the notification queue's lock once for
			// the whole batch. Duplicates in a batch are sent once.
			if _, err := conn.Exec(ctx, announceSQL, an.channel, batch); err != nil {
				an.log.Debug("announcing moved actions", "err", err, "dropped", n)
				_ = conn.Close(context.Background())
				conn = nil
				an.pid.Store(0)
				return
			}
		}
	}
	for {
		select {
		case <-an.wake:
			send(ctx)
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), time.Second)
			send(fctx)
			cancel()
			return
		}
	}
}

// self reports whether a notification came from this process's announcer.
func (an *announcer) self(pid uint32) bool {
	mine := an.pid.Load()
	return mine != 0 && mine == pid
}

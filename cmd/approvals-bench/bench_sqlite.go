package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the driver the store uses

	"github.com/approvals/approvals/sqlite"
)

// sqliteOneIndexTable is the yardstick's table: the columns of actions,
// with the one index an at-most-once claim cannot do without (the held
// intent key) and none of the store's other indexes and CHECK constraints.
// It is the physical limit of "store one new row durably", as pgbench's
// one-index table is on PostgreSQL.
const sqliteOneIndexTable = `CREATE TABLE actions (
    id TEXT NOT NULL, tool TEXT NOT NULL, class TEXT NOT NULL, intent_key TEXT NOT NULL UNIQUE,
    attempt INTEGER NOT NULL, state TEXT NOT NULL, payload TEXT NOT NULL, approved_payload TEXT,
    result TEXT, error TEXT, requested_by TEXT NOT NULL, channel TEXT NOT NULL DEFAULT 'api',
    decided_by TEXT, decision_note TEXT, created_at TEXT NOT NULL, decided_at TEXT, claimed_at TEXT,
    claimed_by TEXT, claim_deadline TEXT, finished_at TEXT, expires_at TEXT,
    has_webhook INTEGER NOT NULL DEFAULT 0, spec TEXT NOT NULL, warnings TEXT NOT NULL DEFAULT '[]'
) STRICT`

// sqliteYardstickInsert is the store's claiming insert of a new at-most-once
// action (sqlite ActionSubmit) with its attempt known to be 1: a new
// key has no earlier attempt, and the yardstick does not look for one.
const sqliteYardstickInsert = `INSERT INTO actions (id, tool, class, intent_key, attempt, state, payload,
    requested_by, channel, created_at, expires_at, has_webhook, spec, warnings)
VALUES (?1, 'bench_unregistered', 'at-most-once', ?2, 1, 'pending', ?3, 'agent:bench', 'api', ?4, ?5, 0,
    '{"name":"bench_unregistered","class":"at-most-once","reason":"not in the tools file","registered":false,"claim_timeout":300000000000,"expires_after":259200000000000,"annotations":{}}',
    '[]')
ON CONFLICT DO NOTHING`

// benchSQLiteInsert is the yardstick for SQLite submissions: cfg.Clients
// goroutines insert new intents for cfg.Duration through one write
// connection with the store's durability (WAL, synchronous=FULL). One
// connection is also what the store uses: SQLite has one writer, and more
// connections only sleep in its busy handler. Each insert is its own
// transaction, so each pays its own fsync, as each submission does today.
func benchSQLiteInsert(ctx context.Context, cfg benchConfig, out io.Writer) error {
	path := strings.TrimPrefix(cfg.DatabaseURL, "sqlite:")
	// A fresh file only: the yardstick fills a table, and must never do so
	// in a database someone uses.
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--database-url %s: the sqlite-insert scenario creates its own file; give a path that does not exist yet", cfg.DatabaseURL)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if cfg.Table == "actions" {
		// The store's own schema, every index and CHECK constraint.
		st, err := sqlite.Open(ctx, abs)
		if err != nil {
			return err
		}
		if err := st.Close(); err != nil {
			return err
		}
	}
	uri := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
	db, err := sql.Open("sqlite", uri+"?_busy_timeout=10000&_foreign_keys=on&_journal_mode=WAL&_synchronous=FULL")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	if cfg.Table == "one-index" {
		if _, err := db.ExecContext(ctx, sqliteOneIndexTable); err != nil {
			return fmt.Errorf("create the yardstick table: %w", err)
		}
	}
	var mode, syncLevel string
	if err := db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return err
	}
	if err := db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&syncLevel); err != nil {
		return err
	}
	// synchronous=FULL is 2: refuse to present anything weaker as the
	// store's durability.
	if !strings.EqualFold(mode, "wal") || syncLevel != "2" {
		return fmt.Errorf("SQLite opened with journal_mode=%s synchronous=%s, want wal and 2 (FULL)", mode, syncLevel)
	}
	stmt, err := db.PrepareContext(ctx, sqliteYardstickInsert)
	if err != nil {
		return err
	}
	defer stmt.Close()

	run := newRunID()
	workers := make([]*benchWorker, cfg.Clients)
	var (
		wg     sync.WaitGroup
		budget atomic.Int64
	)
	budget.Store(int64(cfg.MaxRequests))
	deadline := time.Now().Add(cfg.Duration)
	start := time.Now()
	for i := range workers {
		w := &benchWorker{lat: make([]time.Duration, 0, 4096)}
		workers[i] = w
		wg.Go(func() {
			for n := 0; time.Now().Before(deadline) && ctx.Err() == nil; n++ {
				if budget.Add(-1) < 0 {
					return
				}
				now := time.Now().UTC()
				suffix := run + ":" + strconv.Itoa(i) + ":" + strconv.Itoa(n)
				t0 := time.Now()
				res, err := stmt.ExecContext(ctx, "bench:"+suffix, "sqlite:"+suffix, payloadN(i, n),
					now.Format(sqliteTimeLayout), now.Add(72*time.Hour).Format(sqliteTimeLayout))
				d := time.Since(t0)
				w.requests++
				if err == nil {
					var rows int64
					if rows, err = res.RowsAffected(); err == nil && rows != 1 {
						err = fmt.Errorf("inserted %d rows, want 1 (a new key)", rows)
					}
				}
				if err != nil {
					if ctx.Err() == nil {
						w.fail("insert: %v", err)
					}
					continue
				}
				w.ops++
				w.lat = append(w.lat, d)
			}
		})
	}
	wg.Wait()
	printBench(out, cfg, workers, time.Since(start))
	return ctx.Err()
}

// sqliteTimeLayout is how sqlite stores times.
const sqliteTimeLayout = "2006-01-02T15:04:05.000000000Z"

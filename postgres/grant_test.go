package postgres_test

import (
	"sync"
	"testing"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/postgres"
	"github.com/approvals/approvals/postgres/pgtest"
	"github.com/approvals/approvals/queue"
)

// TestGrantUsedUpUnderItsLock: a submission reads the tool's grants in its
// snapshot, queue.PickGrant picks one, and a grant with a limit is locked
// and read again before its use is counted. Two submissions that picked
// the same grant wait on its lock; once the holder of the lock uses it up,
// each reads it again, finds it used up and picks again without it: one
// takes the next grant's only use, the other waits for a person. Without
// the second read both would count a use of a grant that has none left.
func TestGrantUsedUpUnderItsLock(t *testing.T) {
	t.Parallel()
	s := pgtest.Open(t)
	pool, ctx, now := s.Pool(), t.Context(), time.Now().UTC().Truncate(time.Microsecond)
	first, next := twoGrants(t, s, now, 1)

	// Hold the first grant's row lock, as a concurrent use would.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var xid string
	if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text FROM grants WHERE id = $1 FOR UPDATE`, first).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	got := make([]queue.ActionSubmitResult, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			a := testAction(classify.AtMostOnce, "k"+string(rune('0'+i)), now)
			got[i], errs[i] = s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: a, Event: submittedEv(a),
				Grant: &queue.GrantTry{Now: now, ExpiresAt: now.Add(time.Hour)}})
		})
	}
	waitFor(t, "both submissions to wait on the first grant's lock", func() bool {
		var n int
		// The first waits for this transaction, the second for the row
		// lock the first queues for.
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted
			AND (locktype = 'transactionid' AND transactionid::text = $1 OR locktype = 'tuple' AND relation = 'grants'::regclass)`,
			xid).Scan(&n)
		return err == nil && n == 2
	})
	if _, err := tx.Exec(ctx, `UPDATE grants SET uses = 1 WHERE id = $1`, first); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	byGrant := map[string]int{}
	for i, res := range got {
		if errs[i] != nil {
			t.Fatalf("submission %d: %v", i, errs[i])
		}
		if !res.Created {
			t.Fatalf("submission %d: not created", i)
		}
		switch res.Holder.State {
		case queue.StateApproved:
			byGrant[res.Holder.GrantID]++
		case queue.StatePending:
		default:
			t.Fatalf("submission %d: state %s", i, res.Holder.State)
		}
	}
	if len(byGrant) != 1 || byGrant[next] != 1 {
		t.Fatalf("approved by %v, want one by the next grant %s (the first, %s, was used up)", byGrant, next, first)
	}
	for id, want := range map[string]int{first: 1, next: 1} {
		var uses int
		if err := pool.QueryRow(ctx, `SELECT uses FROM grants WHERE id = $1`, id).Scan(&uses); err != nil {
			t.Fatal(err)
		}
		if uses != want {
			t.Errorf("grant %s: %d uses, want %d", id, uses, want)
		}
	}
}

// TestGrantRevokedWhileLocking: a submission locks the grant it picked
// FOR SHARE when it has no limit, and reads it again. A revocation that
// commits while the submission waits for the lock is seen: the submission
// picks again without it, so no action is approved by a grant revoked
// before the approval committed.
func TestGrantRevokedWhileLocking(t *testing.T) {
	t.Parallel()
	s := pgtest.Open(t)
	pool, ctx, now := s.Pool(), t.Context(), time.Now().UTC().Truncate(time.Microsecond)
	// Neither has a limit; the first expires sooner, so it is picked first.
	revoked, next := twoGrants(t, s, now, 0)
	// A revocation in flight: the row is updated, not yet committed.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var xid string
	if err := tx.QueryRow(ctx, `UPDATE grants SET revoked_at = $2, revoked_by = 'user:ann@example.com', end_reason = 'revoked'
		WHERE id = $1 RETURNING pg_current_xact_id()::text`, revoked, now).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	var (
		res    queue.ActionSubmitResult
		subErr error
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		a := testAction(classify.AtMostOnce, "k", now)
		res, subErr = s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: a, Event: submittedEv(a),
			Grant: &queue.GrantTry{Now: now, ExpiresAt: now.Add(time.Hour)}})
	}()
	waitFor(t, "the submission to wait on the revoked grant's lock", func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'
			AND transactionid::text = $1`, xid).Scan(&n)
		return err == nil && n == 1
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	if subErr != nil {
		t.Fatal(subErr)
	}
	if !res.Created || res.Holder.State != queue.StateApproved || res.Holder.GrantID != next {
		t.Fatalf("created %v, state %s, grant %q: want approved by the grant %s that was not revoked", res.Created, res.Holder.State,
			res.Holder.GrantID, next)
	}
}

// twoGrants creates, for the tool t of testAction, two grants of
// ann@example.com, an approver, with maxUses each (0: no limit) and no
// fields: the first expires in two hours, the second in three, so the first
// is picked first.
func twoGrants(t *testing.T, s *postgres.Store, now time.Time, maxUses int) (first, second string) {
	t.Helper()
	ctx := t.Context()
	seed := testAction(classify.AtMostOnce, "seed", now)
	if _, err := s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: seed, Event: submittedEv(seed)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UserCreate(ctx, &accounts.User{Email: "ann@example.com", PasswordHash: "x", Role: accounts.RoleApprover,
		CreatedAt: now, PasswordChangedAt: now}); err != nil {
		t.Fatal(err)
	}
	first, second = queue.NewID(now), queue.NewID(now)
	if _, err := s.Pool().Exec(ctx, `INSERT INTO grants (id, tool, fields, granted_by, action_id, created_at, expires_at, max_uses)
		VALUES ($1, 't', '[]', 'user:ann@example.com', $3, $4::timestamptz, $4::timestamptz + interval '2 hours', nullif($5, 0)),
		       ($2, 't', '[]', 'user:ann@example.com', $3, $4::timestamptz, $4::timestamptz + interval '3 hours', nullif($5, 0))`,
		first, second, seed.ID, now, maxUses); err != nil {
		t.Fatal(err)
	}
	return first, second
}

// TestGrantTryChecksTheToken: a submission a grant may approve, of a tool
// with active grants, inserts nothing in its first statement and tries
// again with the grants judged; a revoked token is refused there, and a
// live one is approved by the grant.
func TestGrantTryChecksTheToken(t *testing.T) {
	t.Parallel()
	s := pgtest.Open(t)
	ctx, now := t.Context(), time.Now().UTC().Truncate(time.Microsecond)
	first, _ := twoGrants(t, s, now, 0)
	for _, name := range []string{"live", "gone"} {
		if _, err := s.TokenCreate(ctx, accounts.TokenCreateParams{Name: name, Hash: "hash-" + name, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.TokenRevoke(ctx, accounts.TokenRevokeParams{Name: "gone", Now: now}); err != nil {
		t.Fatal(err)
	}
	submit := func(key, hash string) (queue.ActionSubmitResult, error) {
		a := testAction(classify.AtMostOnce, key, now)
		return s.ActionSubmit(ctx, queue.ActionSubmitParams{Action: a, Event: submittedEv(a), TokenHash: hash,
			Grant: &queue.GrantTry{Now: now, ExpiresAt: now.Add(time.Hour)}})
	}
	if _, err := submit("gone", "hash-gone"); queue.ErrorCode(err) != queue.CodeUnauthorized {
		t.Fatalf("revoked token: %v, want %s", err, queue.CodeUnauthorized)
	}
	res, err := submit("live", "hash-live")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || res.Holder.GrantID != first {
		t.Fatalf("live token: created %v, grant %q; want approved by %s", res.Created, res.Holder.GrantID, first)
	}
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM actions WHERE intent_key = 'gone'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("actions of the refused submission: %d (%v), want none", n, err)
	}
}

package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/queue"
)

// Grants (sql/grant.sql): a submission uses one within its claim
// (sql/submit.sql); an approval creates one (decide.go).

// scanGrant scans grantColumns, then extra.
func scanGrant(row rowScanner, extra ...any) (*queue.Grant, error) {
	var (
		g      queue.Grant
		fields string
	)
	if err := row.Scan(append([]any{&g.ID, &g.Tool, &g.Agent, &fields, &g.GrantedBy, &g.ActionID, &g.CreatedAt, &g.ExpiresAt,
		&g.MaxUses, &g.Uses, &g.RevokedAt, &g.RevokedBy, &g.EndReason}, extra...)...); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(fields), &g.Fields); err != nil {
		return nil, fmt.Errorf("grant %s: stored fields: %w", g.ID, err)
	}
	if g.Fields == nil {
		g.Fields = []queue.GrantField{}
	}
	utc(&g.CreatedAt)
	utc(&g.ExpiresAt)
	utcp(g.RevokedAt)
	return &g, nil
}

func grantNotFound(id string) error {
	return queue.Errorf(queue.CodeNotFound, "grant %s not found", id)
}

// GrantGetByID implements queue.Reader.
func (s *Store) GrantGetByID(ctx context.Context, id string) (*queue.Grant, error) {
	if !queue.ValidID(id) {
		return nil, grantNotFound(id)
	}
	g, err := scanGrant(s.pool.QueryRow(ctx, grantGetByIDSQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, grantNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("get grant %s: %w", id, err)
	}
	return g, nil
}

// GrantList implements queue.Reader.
func (s *Store) GrantList(ctx context.Context, p queue.GrantListParams) ([]*queue.Grant, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, grantListSQL, p.Now, p.Active, limit)
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*queue.Grant, error) { return scanGrant(row) })
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	return list, nil
}

// GrantFind implements queue.Reader: the grant queue.PickGrant picks among
// the tool's active grants, read without a lock.
func (s *Store) GrantFind(ctx context.Context, p queue.GrantFindParams) (*queue.Grant, error) {
	cands, err := grantCandidates(ctx, s.pool, p)
	if err != nil {
		return nil, fmt.Errorf("find grant: %w", err)
	}
	g, err := queue.PickGrant(cands, p)
	if err != nil {
		return nil, fmt.Errorf("find grant: %w", err)
	}
	if g == nil {
		return nil, queue.Errorf(queue.CodeNotFound, "no active grant matches")
	}
	return g, nil
}

// querier is what grantCandidates reads through: the pool, or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// grantCandidates reads the grants of p's tool active at p.Now, with their
// granting users (grantCandidatesSQL).
func grantCandidates(ctx context.Context, q querier, p queue.GrantFindParams) ([]queue.GrantCandidate, error) {
	rows, err := q.Query(ctx, grantCandidatesSQL, p.Now, p.Tool)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (queue.GrantCandidate, error) {
		var (
			c      queue.GrantCandidate
			role   string
			groups string
		)
		g, err := scanGrant(row, &c.Granter.Exists, &role, &groups, &c.Granter.NoAccess)
		if err != nil {
			return c, err
		}
		c.Grant, c.Granter.CanDecide, c.Granter.Email = g, accounts.Role(role).CanDecide(), g.GranterEmail()
		if err := json.Unmarshal([]byte(groups), &c.Granter.IdPGroups); err != nil {
			return c, fmt.Errorf("grant %s: granter's idp_groups: %w", g.ID, err)
		}
		return c, nil
	})
}

// GrantRevoke implements queue.Store.
func (s *Store) GrantRevoke(ctx context.Context, p queue.GrantRevokeParams) (*queue.Grant, error) {
	if !queue.ValidID(p.ID) {
		return nil, grantNotFound(p.ID)
	}
	var n int
	if err := s.pool.QueryRow(ctx, grantRevokeSQL, p.ID, p.Now, p.By, p.Event.Kind, p.Event.Channel, jsonArg(p.Event.Data)).Scan(&n); err != nil {
		return nil, fmt.Errorf("revoke grant %s: %w", p.ID, err)
	}
	g, err := s.GrantGetByID(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return g, fmt.Errorf("revoke grant %s: %w", p.ID, queue.ErrStateMismatch)
	}
	return g, nil
}

// PolicyHits implements queue.Reader.
func (s *Store) PolicyHits(ctx context.Context, p queue.PolicyHitsParams) ([]queue.PolicyHit, error) {
	rows, err := s.pool.Query(ctx, policyHitsSQL, p.Day, p.Week, len(queue.PolicyActorPrefix)+1)
	if err != nil {
		return nil, fmt.Errorf("policy hits: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (queue.PolicyHit, error) {
		var h queue.PolicyHit
		err := row.Scan(&h.Tool, &h.Rule, &h.Day, &h.Week)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("policy hits: %w", err)
	}
	return out, nil
}

// endGrantsOfUser ends the grants of the user id for reason at now in tx,
// the transaction that took their right to decide away (grantEndOfUserSQL),
// each with the event the domain makes of it (queue.GrantEndOfUser), written
// as it is but for the grant's id added to its data.
func endGrantsOfUser(ctx context.Context, tx pgx.Tx, id int64, reason string, now time.Time) error {
	ev := queue.GrantEndOfUser(reason, now)
	if _, err := tx.Exec(ctx, grantEndOfUserSQL, id, ev.At, reason, ev.Kind, ev.Actor, ev.Channel, jsonArg(ev.Data)); err != nil {
		return fmt.Errorf("end the grants of user %d: %w", id, err)
	}
	return nil
}

// insertGrant creates the grant of an approval in its transaction, with its
// event.
func insertGrant(ctx context.Context, tx pgx.Tx, g *queue.Grant, ev queue.Event) error {
	fields, agent, maxUses := g.StoredColumns()
	_, err := tx.Exec(ctx, decideGrantSQL, g.ID, g.Tool, agent, fields, g.GrantedBy, g.ActionID,
		g.CreatedAt, g.ExpiresAt, maxUses, ev.Kind, ev.Channel, jsonArg(ev.Data))
	return err
}

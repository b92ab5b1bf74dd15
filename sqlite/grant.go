package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/queue"
)

// grantColumns is the select list of a grants row g, uses counted: the
// counter of a grant with a limit, else the actions it approved.
const grantColumns = `g.id, g.tool, g.agent, g.fields, g.granted_by, g.action_id, g.created_at, g.expires_at, g.max_uses,
	CASE WHEN g.max_uses IS NULL THEN (SELECT count(*) FROM actions a WHERE a.grant_id = g.id) ELSE g.uses END,
	g.revoked_at, g.revoked_by, coalesce(g.end_reason, '')`

// scanGrant scans grantColumns, then extra.
func scanGrant(sc scanner, extra ...any) (*queue.Grant, error) {
	var (
		g                            queue.Grant
		agent, revokedAt, revokedBy  sql.NullString
		fields, createdAt, expiresAt string
		maxUses                      sql.NullInt64
	)
	if err := sc.Scan(append([]any{&g.ID, &g.Tool, &agent, &fields, &g.GrantedBy, &g.ActionID, &createdAt, &expiresAt, &maxUses,
		&g.Uses, &revokedAt, &revokedBy, &g.EndReason}, extra...)...); err != nil {
		return nil, err
	}
	g.Agent, g.MaxUses, g.RevokedBy = agent.String, int(maxUses.Int64), ptrString(revokedBy)
	var err error
	if g.CreatedAt, err = parseTime(createdAt); err != nil {
		return nil, err
	}
	if g.ExpiresAt, err = parseTime(expiresAt); err != nil {
		return nil, err
	}
	if g.RevokedAt, err = parseNullTime(revokedAt); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(fields), &g.Fields); err != nil {
		return nil, fmt.Errorf("grant %s: stored fields: %w", g.ID, err)
	}
	if g.Fields == nil {
		g.Fields = []queue.GrantField{}
	}
	return &g, nil
}

// findGrant returns the grant that approves the submission p, as
// queue.PickGrant picks it among the tool's active grants, read here in one
// query with what queue.GranterStanding needs of each granting user;
// ErrNotFound when none does.
func findGrant(ctx context.Context, q querier, p queue.GrantFindParams) (*queue.Grant, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+grantColumns+`,
		u.id IS NOT NULL, coalesce(u.role, ''), coalesce(u.idp_groups, '[]'), u.sso_denied_at IS NOT NULL
		FROM grants g
		LEFT JOIN users u ON g.granted_by LIKE 'user:%' AND lower(u.email) = lower(substr(g.granted_by, 6))
		WHERE g.tool = ? AND g.revoked_at IS NULL AND g.expires_at > ? AND (g.max_uses IS NULL OR g.uses < g.max_uses)`,
		p.Tool, fmtTime(p.Now))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cands []queue.GrantCandidate
	for rows.Next() {
		var (
			c            queue.GrantCandidate
			role, groups string
		)
		g, err := scanGrant(rows, &c.Granter.Exists, &role, &groups, &c.Granter.NoAccess)
		if err != nil {
			return nil, err
		}
		c.Grant, c.Granter.CanDecide, c.Granter.Email = g, accounts.Role(role).CanDecide(), g.GranterEmail()
		if err := json.Unmarshal([]byte(groups), &c.Granter.IdPGroups); err != nil {
			return nil, fmt.Errorf("grant %s: granter's idp_groups: %w", g.ID, err)
		}
		cands = append(cands, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	g, err := queue.PickGrant(cands, p)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, queue.Errorf(queue.CodeNotFound, "no active grant matches")
	}
	return g, nil
}

// endGrantsOfUser ends, at now for reason (queue.GrantEnd…), the unexpired
// grants of the user id and records on each grant's action the event the
// domain makes of it (queue.GrantEndOfUser, whose actor is also
// revoked_by), as it is but for the grant's id added to its data: run in
// the transaction that removes the user (before the row goes), lowers their
// role or records the identity provider's refusal.
func endGrantsOfUser(ctx context.Context, q querier, id int64, reason string, now time.Time) error {
	ev := queue.GrantEndOfUser(reason, now)
	rows, err := q.QueryContext(ctx, `UPDATE grants SET revoked_at = ?1, revoked_by = ?2, end_reason = ?3
		WHERE lower(granted_by) = (SELECT lower('user:' || email) FROM users WHERE id = ?4) AND revoked_at IS NULL AND expires_at > ?1
		RETURNING id, action_id`, fmtTime(ev.At), ev.Actor, reason, id)
	if err != nil {
		return fmt.Errorf("end the grants of user %d: %w", id, err)
	}
	var ended [][2]string
	for rows.Next() {
		var g [2]string
		if err := rows.Scan(&g[0], &g[1]); err != nil {
			rows.Close()
			return err
		}
		ended = append(ended, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("end the grants of user %d: %w", id, err)
	}
	for _, g := range ended {
		if _, err := q.ExecContext(ctx, `INSERT INTO events (action_id, kind, actor, channel, at, data, fanned_out)
			VALUES (?, ?, ?, ?, ?, json_set(coalesce(?, '{}'), '$.grant', ?), ?)`,
			g[1], ev.Kind, ev.Actor, ev.Channel, fmtTime(ev.At), nullJSON(ev.Data), g[0], boolInt(ev.Unrouted)); err != nil {
			return err
		}
	}
	return nil
}

// useGrant counts one use of grant g, with a limit, by a conditional
// update.
func useGrant(ctx context.Context, q querier, g *queue.Grant, now time.Time) error {
	if g.MaxUses == 0 {
		return nil
	}
	n, err := rowsAffected(q.ExecContext(ctx, `UPDATE grants SET uses = uses + 1
		WHERE id = ? AND revoked_at IS NULL AND expires_at > ? AND uses < max_uses`, g.ID, fmtTime(now)))
	if err != nil {
		return err
	}
	if n != 1 {
		// The writer's lock was held since the grant was read.
		return fmt.Errorf("grant %s changed under the write lock", g.ID)
	}
	return nil
}

// insertGrant stores a new grant.
func insertGrant(ctx context.Context, q querier, g *queue.Grant) error {
	if err := storableTimes(&g.CreatedAt, &g.ExpiresAt); err != nil {
		return err
	}
	fields, agent, maxUses := g.StoredColumns()
	_, err := q.ExecContext(ctx, `INSERT INTO grants (id, tool, agent, fields, granted_by, action_id, created_at, expires_at, max_uses)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, g.ID, g.Tool, agent, fields, g.GrantedBy, g.ActionID,
		fmtTime(g.CreatedAt), fmtTime(g.ExpiresAt), maxUses)
	return err
}

func getGrant(ctx context.Context, q querier, id string) (*queue.Grant, error) {
	g, err := scanGrant(q.QueryRowContext(ctx, `SELECT `+grantColumns+` FROM grants g WHERE g.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, queue.Errorf(queue.CodeNotFound, "grant %s not found", id)
	}
	return g, err
}

// GrantGetByID implements queue.Reader.
func (s *Store) GrantGetByID(ctx context.Context, id string) (*queue.Grant, error) {
	var g *queue.Grant
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		g, err = getGrant(ctx, tx, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get grant: %w", err)
	}
	return g, nil
}

// GrantList implements queue.Reader.
func (s *Store) GrantList(ctx context.Context, p queue.GrantListParams) ([]*queue.Grant, error) {
	const active = `(g.revoked_at IS NULL AND g.expires_at > ?1 AND (g.max_uses IS NULL OR g.uses < g.max_uses))`
	where := `1`
	if p.Active != nil {
		where = active
		if !*p.Active {
			where = `NOT ` + active
		}
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	var list []*queue.Grant
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+grantColumns+` FROM grants g WHERE `+where+`
			ORDER BY g.created_at DESC, g.id DESC LIMIT ?2`, fmtTime(p.Now), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		list = nil
		for rows.Next() {
			g, err := scanGrant(rows)
			if err != nil {
				return err
			}
			list = append(list, g)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	return list, nil
}

// GrantFind implements queue.Reader: findGrant, read only.
func (s *Store) GrantFind(ctx context.Context, p queue.GrantFindParams) (*queue.Grant, error) {
	var g *queue.Grant
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		g, err = findGrant(ctx, tx, p)
		return err
	})
	if err != nil {
		if queue.ErrorCode(err) == queue.CodeNotFound {
			return nil, err
		}
		return nil, fmt.Errorf("find grant: %w", err)
	}
	return g, nil
}

// GrantRevoke implements queue.Store.
func (s *Store) GrantRevoke(ctx context.Context, p queue.GrantRevokeParams) (*queue.Grant, error) {
	var (
		g        *queue.Grant
		mismatch bool
	)
	err := s.withTx(ctx, func(ctx context.Context, tx querier) error {
		mismatch = false
		n, err := rowsAffected(tx.ExecContext(ctx, `UPDATE grants SET revoked_at = ?, revoked_by = ?, end_reason = 'revoked' WHERE id = ? AND revoked_at IS NULL`,
			fmtTime(p.Now), p.By, p.ID))
		if err != nil {
			return err
		}
		if g, err = getGrant(ctx, tx, p.ID); err != nil {
			return err
		}
		if n == 0 {
			mismatch = true
			return nil
		}
		ev := p.Event
		ev.ActionID = g.ActionID
		_, err = insertEvent(ctx, tx, ev)
		return err
	})
	if err != nil {
		if queue.ErrorCode(err) == queue.CodeNotFound {
			return nil, err
		}
		return nil, fmt.Errorf("revoke grant %s: %w", p.ID, err)
	}
	if mismatch {
		return g, fmt.Errorf("revoke grant %s: %w", p.ID, queue.ErrStateMismatch)
	}
	return g, nil
}

// PolicyHits implements queue.Reader: the policy events of the last week by
// tool and rule, read through events_policy.
func (s *Store) PolicyHits(ctx context.Context, p queue.PolicyHitsParams) ([]queue.PolicyHit, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT a.tool, substr(e.actor, ?), sum(e.at >= ?), count(*)
		FROM events e JOIN actions a ON a.id = e.action_id
		WHERE e.channel = 'policy' AND e.at >= ? GROUP BY 1, 2 ORDER BY 1, 2`,
		len(queue.PolicyActorPrefix)+1, fmtTime(p.Day), fmtTime(p.Week))
	if err != nil {
		return nil, fmt.Errorf("policy hits: %w", err)
	}
	defer rows.Close()
	var out []queue.PolicyHit
	for rows.Next() {
		var h queue.PolicyHit
		if err := rows.Scan(&h.Tool, &h.Rule, &h.Day, &h.Week); err != nil {
			return nil, fmt.Errorf("policy hits: %w", err)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

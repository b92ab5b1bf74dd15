package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/approvals/approvals/queue"
)

// ReasonPromptAdd implements queue.ReasonPrompts.
func (s *Store) ReasonPromptAdd(ctx context.Context, p queue.ReasonPrompt) error {
	if !queue.ValidID(p.ActionID) {
		return queue.ActionNotFound(p.ActionID)
	}
	_, err := s.pool.Exec(ctx, reasonPromptAddSQL, p.Kind, p.Address, p.Ref, p.ActionID, p.Asked, p.SentAt)
	switch {
	case isForeignKeyViolation(err):
		return queue.ActionNotFound(p.ActionID)
	case isUniqueViolation(err):
		return fmt.Errorf("reason prompt %s %s/%s is recorded already", p.Kind, p.Address, p.Ref)
	case err != nil:
		return fmt.Errorf("record reason prompt %s %s/%s: %w", p.Kind, p.Address, p.Ref, err)
	}
	return nil
}

// ReasonPromptGet implements queue.ReasonPrompts.
func (s *Store) ReasonPromptGet(ctx context.Context, p queue.ReasonPromptGetParams) (*queue.ReasonPrompt, error) {
	var r queue.ReasonPrompt
	err := s.pool.QueryRow(ctx, reasonPromptGetSQL, p.Kind, p.Address, p.Ref).Scan(&r.Kind, &r.Address, &r.Ref, &r.ActionID, &r.Asked, &r.SentAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, queue.Errorf(queue.CodeNotFound, "no reason prompt %s %s/%s", p.Kind, p.Address, p.Ref)
	}
	if err != nil {
		return nil, fmt.Errorf("get reason prompt %s %s/%s: %w", p.Kind, p.Address, p.Ref, err)
	}
	r.SentAt = r.SentAt.UTC()
	return &r, nil
}

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/approvals/approvals/queue"
)

// ReasonPromptAdd implements queue.ReasonPrompts.
func (s *Store) ReasonPromptAdd(ctx context.Context, p queue.ReasonPrompt) error {
	_, err := s.exec(ctx, `INSERT INTO reason_prompts (kind, address, ref, action_id, asked, sent_at) VALUES (?, ?, ?, ?, ?, ?)`,
		p.Kind, p.Address, p.Ref, p.ActionID, p.Asked, fmtTime(p.SentAt))
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
	var sent string
	err := s.read.QueryRowContext(ctx, `SELECT kind, address, ref, action_id, asked, sent_at FROM reason_prompts
	WHERE kind = ? AND address = ? AND ref = ?`, p.Kind, p.Address, p.Ref).Scan(&r.Kind, &r.Address, &r.Ref, &r.ActionID, &r.Asked, &sent)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, queue.Errorf(queue.CodeNotFound, "no reason prompt %s %s/%s", p.Kind, p.Address, p.Ref)
	}
	if err != nil {
		return nil, fmt.Errorf("get reason prompt %s %s/%s: %w", p.Kind, p.Address, p.Ref, err)
	}
	if r.SentAt, err = parseTime(sent); err != nil {
		return nil, err
	}
	return &r, nil
}

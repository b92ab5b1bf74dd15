package queue

import (
	"context"
	"time"
)

// ReasonPrompt is a question a chat channel sent one user for the reason of a rejection
// (Telegram's force-reply message after Reject): only a reply to that very message, by
// that user, decides. It is recorded when it is sent, so that a reply is matched by the
// message it answers, never by what a message says (an agent writes the approval messages'
// text), and so that any server process can take the reply.
type ReasonPrompt struct {
	Kind string // telegram
	// Address is where it went, as the kind names it (the Telegram chat id), and Ref the
	// message's handle there (Telegram's message_id, unique within its chat).
	Address, Ref string
	ActionID     string
	// Asked is the channel's own id of the user asked (Telegram's user id).
	Asked  string
	SentAt time.Time
}

// ReasonPromptGetParams name one sent message.
type ReasonPromptGetParams struct {
	Kind, Address, Ref string
}

// ReasonPrompts records the reason prompts sent, part of Store.
type ReasonPrompts interface {
	// ReasonPromptAdd records p. ErrNotFound for an unknown action; a message recorded
	// already (the same kind, address and ref) is an error and keeps the first record.
	ReasonPromptAdd(ctx context.Context, p ReasonPrompt) error
	// ReasonPromptGet returns the prompt sent as the message p names, or ErrNotFound.
	ReasonPromptGet(ctx context.Context, p ReasonPromptGetParams) (*ReasonPrompt, error)
}

-- The messages that ask for a rejection's reason (queue.ReasonPrompts).

-- name: reasonPromptAddSQL
INSERT INTO reason_prompts (kind, address, ref, action_id, asked, sent_at) VALUES ($1, $2, $3, $4, $5, $6);

-- name: reasonPromptGetSQL
SELECT kind, address, ref, action_id::text, asked, sent_at FROM reason_prompts
WHERE kind = $1 AND address = $2 AND ref = $3;

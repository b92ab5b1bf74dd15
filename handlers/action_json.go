package handlers

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/approvals/approvals/queue"
)

// appendActionJSON appends the action as json.Marshal encodes it, byte for
// byte (TestAppendJSONMatchesEncodingJSON), without reflection: the API
// writes an action in every answer to a submission, where encoding/json
// took a twelfth of the server's time. It reports false, appending
// nothing, for an action it leaves to encoding/json: a time not in UTC or
// outside years 0-9999 (time.Time.MarshalJSON has rules of its own for
// those).
func appendActionJSON(b []byte, a *queue.Action) ([]byte, bool) {
	times := []*time.Time{&a.CreatedAt, a.DecidedAt, a.ClaimedAt, a.FinishedAt, a.ExpiresAt}
	for i := range a.Approvals {
		times = append(times, &a.Approvals[i].At)
	}
	if a.Ticket != nil {
		times = append(times, &a.Ticket.OpenedAt, a.Ticket.ResolvedAt)
	}
	for _, t := range times {
		if t != nil && (t.Location() != time.UTC || t.Year() < 0 || t.Year() > 9999) {
			return b, false
		}
	}
	b = append(b, `{"id":`...)
	b = appendString(b, a.ID)
	b = append(b, `,"tool":`...)
	b = appendString(b, a.Tool)
	b = append(b, `,"class":`...)
	b = appendString(b, string(a.Class))
	b = append(b, `,"intent_key":`...)
	b = appendString(b, a.IntentKey)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(a.Attempt), 10)
	b = append(b, `,"state":`...)
	b = appendString(b, string(a.State))
	b = append(b, `,"payload":`...)
	b = appendRaw(b, a.Payload)
	b = append(b, `,"approved_payload":`...)
	b = appendRaw(b, a.ApprovedPayload)
	b = append(b, `,"result":`...)
	b = appendRaw(b, a.Result)
	b = append(b, `,"error":`...)
	b = appendStringPtr(b, a.Error)
	b = append(b, `,"requested_by":`...)
	b = appendString(b, a.RequestedBy)
	b = append(b, `,"decided_by":`...)
	b = appendStringPtr(b, a.DecidedBy)
	b = append(b, `,"decision_note":`...)
	b = appendStringPtr(b, a.DecisionNote)
	b = append(b, `,"created_at":`...)
	b = appendTime(b, a.CreatedAt)
	b = append(b, `,"decided_at":`...)
	b = appendTimePtr(b, a.DecidedAt)
	b = append(b, `,"claimed_at":`...)
	b = appendTimePtr(b, a.ClaimedAt)
	b = append(b, `,"finished_at":`...)
	b = appendTimePtr(b, a.FinishedAt)
	b = append(b, `,"expires_at":`...)
	b = appendTimePtr(b, a.ExpiresAt)
	b = append(b, `,"ticket":`...)
	if t := a.Ticket; t == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"id":`...)
		b = appendString(b, t.ID)
		b = append(b, `,"kind":`...)
		b = appendString(b, string(t.Kind))
		b = append(b, `,"state":`...)
		b = appendString(b, string(t.State))
		b = append(b, `,"opened_at":`...)
		b = appendTime(b, t.OpenedAt)
		b = append(b, `,"resolved_at":`...)
		b = appendTimePtr(b, t.ResolvedAt)
		b = append(b, `,"resolved_by":`...)
		b = appendStringPtr(b, t.ResolvedBy)
		b = append(b, `,"outcome":`...)
		if t.Outcome == nil {
			b = append(b, "null"...)
		} else {
			b = appendString(b, string(*t.Outcome))
		}
		b = append(b, `,"note":`...)
		b = appendStringPtr(b, t.Note)
		b = append(b, '}')
	}
	b = append(b, `,"warnings":`...)
	if a.Warnings == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, w := range a.Warnings {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, w)
		}
		b = append(b, ']')
	}
	b = append(b, `,"approvals_required":`...)
	b = strconv.AppendInt(b, int64(a.ApprovalsRequired), 10)
	b = append(b, `,"approvals":`...)
	if a.Approvals == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, ap := range a.Approvals {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"by":`...)
			b = appendString(b, ap.By)
			b = append(b, `,"at":`...)
			b = appendTime(b, ap.At)
			b = append(b, `,"note":`...)
			b = appendString(b, ap.Note)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"edited_fields":`...)
	if edited := a.EditedFields(); edited == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, p := range edited {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, p)
		}
		b = append(b, ']')
	}
	return append(b, '}'), true
}

func appendStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendString(b, *s)
}

func appendTimePtr(b []byte, t *time.Time) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	return appendTime(b, *t)
}

// appendTime writes a UTC time of years 0-9999 as time.Time.MarshalJSON
// does (RFC 3339 with nanoseconds).
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendRaw writes a stored JSON value as encoding/json writes a
// json.RawMessage: null when empty, else compacted with <, > and &
// escaped. A value with none of those characters nor white space (or the
// first byte of U+2028 and U+2029) is already written that way.
func appendRaw(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	if !needsCompact(raw) {
		return append(b, raw...)
	}
	out, err := json.Marshal(raw)
	if err != nil {
		// Not JSON: the stores keep only checked JSON, so this is never
		// reached; null keeps the answer well-formed.
		return append(b, "null"...)
	}
	return append(b, out...)
}

func needsCompact(raw []byte) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\r', '\n', '<', '>', '&', 0xe2:
			return true
		}
	}
	return false
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string the way encoding/json does with
// HTML escaping on: <, >, & and U+2028/U+2029 as \u escapes, invalid UTF-8
// as U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

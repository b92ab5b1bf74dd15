// Package audit is the tamper-evident log (docs/audit.md): every
// event (an action's timeline, decisions, logins, token and user changes)
// is sealed in one hash chain, in seal order, with a gapless seq and
//
//	hash(seq) = SHA-256(hash(seq-1) || EventJSON(event))
//
// (hash(0) is 32 zero bytes). The package holds the rules alone: the
// canonical JSON (Canonical, EventJSON), the sealer's round (Seal, over a
// Store: the stores keep the chain beside the events), the export and its
// signed checkpoint (Export, Checkpoint), and the verification of the
// database and of an export (VerifyStore, VerifyFile). maintenance runs the
// sealer in every server process; cmd/approvals has the commands.
//
// Canonical JSON is RFC 8785 (JCS) with one difference: a number is kept
// exactly as it was written, not rounded to the nearest IEEE 754 double
// and printed again. Payloads carry numbers of up to 100 significant
// digits; rounding them would give 12345678901234567890 and
// 12345678901234567891 one hash, so an edit of one into the other would go
// unseen. Everything else is JCS: no whitespace, members sorted by their
// names' UTF-16 code units, strings escaped as ECMAScript's JSON.stringify
// escapes them (only the quote, the backslash and characters below U+0020,
// with \b \t \n \f \r where they exist, else \u00xx in lowercase). A
// member name that appears twice (which the service refuses at its edge)
// is kept twice, in its order; bytes that are not UTF-8 and unpaired
// surrogate escapes are U+FFFD. A stored value that is not JSON at all
// (which neither store admits) is hashed as the JSON string of its text.
//
// docs/audit.md describes the export format, the sealing argument on
// PostgreSQL and how to run the verification.
package audit

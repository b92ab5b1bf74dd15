package classify

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ValidateKey checks the intent key rules: 1–255 characters (runes), valid UTF-8, every
// character printable (unicode.IsPrint: no control characters, no NUL, no spaces other than
// the ASCII space) and none invisible (IsInvisible: a key that reads like another on screen
// would hold a different intent). The error says what is wrong and where; for an invisible
// character it is an *InvisibleKeyError.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("intent key is empty; it needs 1 to %d characters", MaxKeyLength)
	}
	if !utf8.ValidString(key) {
		return fmt.Errorf("intent key is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(key); n > MaxKeyLength {
		return fmt.Errorf("intent key is %d characters long; the limit is %d", n, MaxKeyLength)
	}
	pos := 0
	for _, r := range key {
		pos++
		switch {
		case unicode.IsControl(r):
			return fmt.Errorf("intent key contains a control character (%U) at character %d", r, pos)
		case IsInvisible(r):
			return &InvisibleKeyError{Rune: r, Position: pos}
		case !unicode.IsPrint(r):
			return fmt.Errorf("intent key contains a non-printable character (%U) at character %d", r, pos)
		}
	}
	return nil
}

// InvisibleKeyError is ValidateKey's refusal of a key holding an invisible character: the
// character and its position, counted in characters from 1.
type InvisibleKeyError struct {
	Rune     rune
	Position int
}

func (e *InvisibleKeyError) Error() string {
	return fmt.Sprintf("intent key contains an invisible character (%U) at character %d", e.Rune, e.Position)
}

var (
	uuidPattern    = regexp.MustCompile(`(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	rfc3339Pattern = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}`)
	// A ULID: 26 Crockford base32 characters whose first is 0–7 (48-bit time), standing alone
	// in its token.
	ulidPattern = regexp.MustCompile(`(?i)^[0-7][0-9a-hjkmnp-tv-z]{25}$`)
)

// Plausible unix times: 2001-09-09 up to the end of 2099, in seconds or milliseconds. Older or
// later numbers with the same digit count are more likely phone or account numbers.
const (
	minUnixSeconds = 1_000_000_000
	maxUnixSeconds = 4_102_444_800
)

// LooksRandom reports whether key looks like it names a request rather than a business fact,
// which defeats the intent guard: every retry would compute a new key. It is a heuristic for a
// warning, never a refusal. The key is random when it contains
//   - a UUID (8-4-4-4-12 hex digits) anywhere;
//   - a run of 16 or more hex digits that includes a letter a–f (a hash or a dash-less UUID;
//     long all-digit runs are left alone, they are usually order or account numbers);
//   - an RFC 3339 date-time ("2024-05-01T12:00:00Z"; a bare date is a business fact);
//
// or when a segment (the key split on ':', '/' and '|') is
//   - a bare unix timestamp: exactly 10 or 13 digits within 2001–2099, and nothing else, so
//     "req-1700000000" is not random by this rule (the digits are not the whole segment) while
//     "req:1700000000" is;
//   - or holds a ULID as a whole token (tokens split on anything but letters and digits;
//     26 digits alone are not taken for a ULID).
func LooksRandom(key string) bool {
	// Every submission runs this: cheap byte checks decide before the
	// regular expressions run (both need a dash).
	if strings.IndexByte(key, '-') >= 0 && (uuidPattern.MatchString(key) || rfc3339Pattern.MatchString(key)) {
		return true
	}
	if hasHexRunWithLetter(key, 16) {
		return true
	}
	segments := strings.FieldsFunc(key, func(r rune) bool { return r == ':' || r == '/' || r == '|' })
	for _, seg := range segments {
		if isUnixTimestamp(seg) {
			return true
		}
		// Tokens inside a segment: "req_01ARZ3NDEKTSV4RRFFQ69G5FAV" holds a ULID.
		for _, tok := range strings.FieldsFunc(seg, notAlphanumeric) {
			// Characters, not bytes: (?i) also matches ſ for s and K for k.
			if utf8.RuneCountInString(tok) == 26 && ulidPattern.MatchString(tok) && !allDigits(tok) {
				return true
			}
		}
	}
	return false
}

// hasHexRunWithLetter reports whether s holds a run of at least n hex
// digits that has a letter among them.
func hasHexRunWithLetter(s string, n int) bool {
	run, letter := 0, false
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch c := s[i]; {
			case c >= '0' && c <= '9':
				run++
				continue
			case c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F':
				run++
				letter = true
				continue
			}
		}
		if run >= n && letter {
			return true
		}
		run, letter = 0, false
	}
	return false
}

func notAlphanumeric(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

func isUnixTimestamp(s string) bool {
	if (len(s) != 10 && len(s) != 13) || !allDigits(s) {
		return false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return false
	}
	if len(s) == 13 {
		n /= 1000
	}
	return n >= minUnixSeconds && n < maxUnixSeconds
}

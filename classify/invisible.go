package classify

import "unicode"

//go:generate go run invisible_gen.go /usr/share/unicode/DerivedCoreProperties.txt

// IsInvisible reports whether r is a character that is not drawn: one of
// Unicode's Default_Ignorable_Code_Point (invisible_table.go, from the
// Unicode Character Database 15.0.0, Go's own Unicode version) or of the
// format category Cf. That takes in the bidirectional controls, zero-width
// characters, soft hyphen, invisible operators, Hangul fillers, variation
// selectors and the tag characters U+E0000-E007F ("ASCII smuggling").
// The one table drives both the payload warning invisible_characters and
// the refusal of an intent key (ValidateKey).
func IsInvisible(r rune) bool {
	return r >= 0x80 && (unicode.Is(defaultIgnorable, r) || unicode.Is(unicode.Cf, r))
}

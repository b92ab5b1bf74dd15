package classify

import (
	"testing"
	"unicode"
)

// The generated table is Default_Ignorable_Code_Point as Unicode derives
// it, computed here again from Go's own tables (the same Unicode version):
// Other_Default_Ignorable_Code_Point + Cf + Variation_Selector - White_Space
// - FFF9..FFFB - 13430..13440 - Prepended_Concatenation_Mark.
func TestDefaultIgnorableTable(t *testing.T) {
	t.Parallel()
	if ignorableVersion != unicode.Version {
		t.Fatalf("the table is from Unicode %s, Go's unicode package is %s: regenerate it (go generate ./classify)", ignorableVersion, unicode.Version)
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		derived := (unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Variation_Selector, r)) &&
			!unicode.Is(unicode.White_Space, r) && !(r >= 0xFFF9 && r <= 0xFFFB) && !(r >= 0x13430 && r <= 0x13440) &&
			!unicode.Is(unicode.Prepended_Concatenation_Mark, r)
		if got := unicode.Is(defaultIgnorable, r); got != derived {
			t.Fatalf("U+%04X: table says %v, the derivation %v", r, got, derived)
		}
	}
}

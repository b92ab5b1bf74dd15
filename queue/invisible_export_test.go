package queue

import "unicode"

// For TestDefaultIgnorableTable.
const IgnorableVersion = ignorableVersion

func DefaultIgnorable(r rune) bool { return unicode.Is(defaultIgnorable, r) }

package classify

import (
	"strings"
	"time"
)

// FormatDuration writes d as a Go duration without zero units, as a tools file would say
// it: 8h, 15m, 1h30m (time.ParseDuration reads it back).
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

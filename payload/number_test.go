package payload_test

import (
	"math/big"
	"testing"

	"github.com/approvals/approvals/payload"
)

// NumberEqual agrees with math/big on numbers small enough for it.
func TestNumberEqual(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want bool
	}{
		{"1", "1.0", true}, {"1", "1e0", true}, {"100", "1e2", true}, {"1E+2", "100.000", true},
		{"0.001", "1e-3", true}, {"-0", "0", true}, {"0e5", "0.000", true}, {"-1.5", "-15e-1", true},
		{"1", "-1", false}, {"1", "2", false}, {"10", "1", false}, {"0.1", "1", false}, {"1e2", "1e3", false},
		{"12", "21", false}, {"0", "1e-400", false},
		// Exponents past int64, compared digit by digit.
		{"1e99999999999999999999999", "10e99999999999999999999998", true},
		{"1e99999999999999999999999", "1e99999999999999999999998", false},
		{"1e-99999999999999999999999", "0.1e-99999999999999999999998", true},
		{"123e-00000000000000000000000000001", "12.3", true},
		{"1e100000000000000000000", "1e20", false},
	}
	for _, tt := range tests {
		if got := payload.NumberEqual(tt.a, tt.b); got != tt.want {
			t.Errorf("NumberEqual(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := payload.NumberEqual(tt.b, tt.a); got != tt.want {
			t.Errorf("NumberEqual(%s, %s) = %v, want %v", tt.b, tt.a, got, tt.want)
		}
		ra, ok1 := new(big.Rat).SetString(tt.a)
		rb, ok2 := new(big.Rat).SetString(tt.b)
		if len(tt.a)+len(tt.b) < 40 && ok1 && ok2 {
			if big := ra.Cmp(rb) == 0; big != tt.want {
				t.Errorf("math/big says %s == %s is %v; the table is wrong", tt.a, tt.b, big)
			}
		}
	}
}

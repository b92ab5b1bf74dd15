package payload

import (
	"strconv"
	"strings"
)

// NumberEqual reports whether two JSON numbers (valid syntax, as
// encoding/json's json.Number holds them) are the same value, in time
// linear in their length: 1e999999 and 10e999998 are equal without building
// either (math/big would build a million-digit integer for each). Each is
// read as a sign, its significant digits without leading or trailing zeros,
// and the exponent of the point before the first of them; two numbers are
// equal when all three are. Zero is zero whatever its sign and exponent.
func NumberEqual(a, b string) bool {
	x, y := parseDecimal(a), parseDecimal(b)
	if x.digits == "" || y.digits == "" {
		return x.digits == y.digits
	}
	return x.neg == y.neg && x.digits == y.digits && x.pointExponent() == y.pointExponent()
}

// decimal is a JSON number as 0.digits × 10^(exp + shift), with exp the
// exponent as written (sign and digits, leading zeros dropped) and shift
// what placing the point before the first significant digit adds.
type decimal struct {
	neg      bool
	digits   string // significant digits; "" for zero
	expNeg   bool
	expText  string // the written exponent's digits, without leading zeros; "" for 0
	shiftInt int64
}

func parseDecimal(s string) decimal {
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.neg, s = true, s[1:]
	}
	mant, exp, _ := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	all := intPart + frac
	lead := len(all) - len(strings.TrimLeft(all, "0"))
	d.digits = strings.TrimRight(all[lead:], "0")
	d.shiftInt = int64(len(intPart) - lead)
	switch {
	case strings.HasPrefix(exp, "-"):
		d.expNeg, exp = true, exp[1:]
	case strings.HasPrefix(exp, "+"):
		exp = exp[1:]
	}
	d.expText = strings.TrimLeft(exp, "0")
	return d
}

// pointExponent is exp + shift as canonical decimal text ("-3", "0",
// "1000001"): exact for any length of written exponent.
func (d decimal) pointExponent() string {
	if len(d.expText) <= 17 { // fits an int64 with room for the shift
		var e int64
		if d.expText != "" {
			e, _ = strconv.ParseInt(d.expText, 10, 64)
		}
		if d.expNeg {
			e = -e
		}
		return strconv.FormatInt(e+d.shiftInt, 10)
	}
	shiftNeg, shift := d.shiftInt < 0, d.shiftInt
	if shiftNeg {
		shift = -shift
	}
	neg, mag := addSigned(d.expNeg, d.expText, shiftNeg, strconv.FormatInt(shift, 10))
	if neg {
		return "-" + mag
	}
	return mag
}

// addSigned adds two signed decimal magnitudes (digit strings without
// leading zeros, "" or "0" for zero), digit by digit.
func addSigned(aNeg bool, a string, bNeg bool, b string) (bool, string) {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if aNeg == bNeg {
		return aNeg && (a != "" || b != ""), addMagnitudes(a, b)
	}
	switch c := compareMagnitudes(a, b); {
	case c == 0:
		return false, "0"
	case c > 0:
		return aNeg, subMagnitudes(a, b)
	default:
		return bNeg, subMagnitudes(b, a)
	}
}

func compareMagnitudes(a, b string) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

func addMagnitudes(a, b string) string {
	if len(a) < len(b) {
		a, b = b, a
	}
	out := make([]byte, len(a)+1)
	carry := byte(0)
	for i := 0; i < len(a); i++ {
		s := a[len(a)-1-i] - '0' + carry
		if i < len(b) {
			s += b[len(b)-1-i] - '0'
		}
		out[len(out)-1-i], carry = s%10+'0', s/10
	}
	out[0] = carry + '0'
	return trimZeros(out)
}

// subMagnitudes is a - b for a >= b.
func subMagnitudes(a, b string) string {
	out := make([]byte, len(a))
	borrow := 0
	for i := 0; i < len(a); i++ {
		d := int(a[len(a)-1-i]-'0') - borrow
		if i < len(b) {
			d -= int(b[len(b)-1-i] - '0')
		}
		borrow = 0
		if d < 0 {
			d, borrow = d+10, 1
		}
		out[len(out)-1-i] = byte(d) + '0'
	}
	return trimZeros(out)
}

func trimZeros(b []byte) string {
	s := strings.TrimLeft(string(b), "0")
	if s == "" {
		return "0"
	}
	return s
}

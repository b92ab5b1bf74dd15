package handlers_test

import (
	"strings"
	"testing"

	"github.com/approvals/approvals/handlers"
)

// BenchmarkDecodeSubmit is the decoding every submission pays before the
// service sees it: the strict check and the split into members, in one
// pass (docs/performance.md, round 3).
func BenchmarkDecodeSubmit(b *testing.B) {
	for name, body := range map[string][]byte{
		"submission 200B": []byte(`{"tool":"send_customer_email","intent_key":"email:c-1234:renewal","payload":{"customer_id":"c-1234","topic":"renewal","to":"ann@example.com","subject":"Your renewal","body":"Hello Ann"}}`),
		"payload 2KB": []byte(`{"tool":"create_order","payload":{"order":{"id":"o-1","lines":[` + strings.Repeat(`{"sku":"a-1","qty":2,"price":12.50,"note":"gift wrap"},`, 30) +
			`{"sku":"z","qty":1}]},"meta":{"source":"agent","tags":["x","y"]}}}`),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := handlers.DecodeSubmit(body, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

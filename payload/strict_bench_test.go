package payload_test

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/approvals/approvals/payload"
)

// BenchmarkStrictJSONCheck is why the check streams with
// go-json-experiment's jsontext instead of encoding/json: on a submission
// body, encoding/json's token reader alone (without the bookkeeping of
// keys a check needs on top) costs several times as much, on the path of
// every submission (README, "Dependencies and why"; docs/performance.md).
func BenchmarkStrictJSONCheck(b *testing.B) {
	bodies := map[string][]byte{
		"submission 200B": []byte(`{"tool":"send_customer_email","intent_key":"email:c-1234:renewal","payload":{"customer_id":"c-1234","topic":"renewal","to":"ann@example.com","subject":"Your renewal","body":"Hello Ann"}}`),
		"payload 2KB": []byte(`{"order":{"id":"o-1","lines":[` + strings.Repeat(`{"sku":"a-1","qty":2,"price":12.50,"note":"gift wrap"},`, 30) +
			`{"sku":"z","qty":1}]},"meta":{"source":"agent","tags":["x","y"]}}`),
	}
	for name, body := range bodies {
		b.Run("jsontext/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := payload.CheckStrictJSON(body, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("encoding-json-tokens/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				dec := json.NewDecoder(bytes.NewReader(body))
				dec.UseNumber()
				for {
					if _, err := dec.Token(); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

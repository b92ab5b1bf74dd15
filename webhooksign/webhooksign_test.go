package webhooksign_test

import (
	"net/http"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/approvals/approvals/webhooksign"
)

// The test vector of the Standard Webhooks specification's reference libraries.
func TestSignMatchesSpecificationVector(t *testing.T) {
	t.Parallel()
	s, err := webhooksign.New("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := s.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
}

// A receiver using the official library verifies what SetHeaders signs, under both secret
// forms, and refuses a changed body.
func TestSignedRequestVerifiesWithOfficialLibrary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		secret string
		verify func() (*standardwebhooks.Webhook, error)
	}{
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", func() (*standardwebhooks.Webhook, error) {
			return standardwebhooks.NewWebhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		}},
		{"plain-secret", func() (*standardwebhooks.Webhook, error) {
			return standardwebhooks.NewWebhookRaw([]byte("plain-secret"))
		}},
	} {
		s, err := webhooksign.New(tc.secret)
		if err != nil {
			t.Fatal(err)
		}
		body := []byte(`{"id":"a"}`)
		h := http.Header{}
		s.SetHeaders(h, "0190-action", time.Now(), body)
		v, err := tc.verify()
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(body, h); err != nil {
			t.Fatalf("%s: official library refused our signature: %v", tc.secret, err)
		}
		if err := v.Verify([]byte(`{"id":"b"}`), h); err == nil {
			t.Fatalf("%s: a changed body verified", tc.secret)
		}
	}
}

func TestNewRefusesBadSecrets(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "whsec_not base64!"} {
		if _, err := webhooksign.New(s); err == nil {
			t.Errorf("New(%q) accepted", s)
		}
	}
}

// Package webhooksign signs the webhooks approvals sends (executor deliveries and event
// notifications) as the Standard Webhooks specification says, so that a receiver can verify
// them with any Standard Webhooks library and reject replays by their timestamp.
package webhooksign

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The headers a signed request carries.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

const secretPrefix = "whsec_"

// Signer signs request bodies under one secret.
type Signer struct {
	wh *standardwebhooks.Webhook
}

// New returns a Signer for APPROVALS_WEBHOOK_SECRET: a secret that starts with "whsec_" is
// the base64 text after the prefix, decoded (the form Standard Webhooks libraries generate);
// any other secret is used as its bytes.
func New(secret string) (*Signer, error) {
	if secret == "" {
		return nil, errors.New("webhook secret is empty")
	}
	if strings.HasPrefix(secret, secretPrefix) {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			return nil, fmt.Errorf("webhook secret: the text after %q is not valid base64", secretPrefix)
		}
		return &Signer{wh: wh}, nil
	}
	wh, err := standardwebhooks.NewWebhookRaw([]byte(secret))
	if err != nil {
		return nil, fmt.Errorf("webhook secret: %w", err)
	}
	return &Signer{wh: wh}, nil
}

// Sign returns the webhook-signature value ("v1,<base64>") of body sent as message id at ts.
func (s *Signer) Sign(id string, ts time.Time, body []byte) string {
	sig, err := s.wh.Sign(id, ts, body)
	if err != nil {
		// The library's Sign only formats an HMAC; it has no failing path.
		panic(fmt.Sprintf("webhooksign: %v", err))
	}
	return sig
}

// SetHeaders sets the three Standard Webhooks headers of a request carrying body.
func (s *Signer) SetHeaders(h http.Header, id string, ts time.Time, body []byte) {
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, s.Sign(id, ts, body))
}

package sso

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/gorilla/securecookie"
)

// FlowMaxAge is how long a started sign-in may take at the provider; past
// it the browser's flow cookie opens nothing and the state is refused.
const FlowMaxAge = 10 * time.Minute

// Flow is one sign-in begun by a browser: what the callback checks the
// provider's answer against. It lives in the browser's cookie, signed and
// encrypted, so an anonymous visitor writes nothing to the database.
type Flow struct {
	State    string    `json:"state"`
	Nonce    string    `json:"nonce"`
	Verifier string    `json:"verifier"` // PKCE code_verifier
	Next     string    `json:"next"`     // where to go once signed in
	At       time.Time `json:"at"`
}

// Sealer protects what a sign-in leaves with the browser and in the
// session row: the flow cookie (signed and encrypted) and the provider's
// refresh and ID tokens (encrypted, so a copy of the sessions table holds
// no credential for the provider). Its keys derive from the session
// secret, so every server process opens what another sealed.
type Sealer struct {
	flow  *securecookie.SecureCookie
	token cipher.AEAD
}

// NewSealer derives the keys from secret (the session secret).
func NewSealer(secret []byte) (*Sealer, error) {
	if len(secret) < 32 {
		return nil, fmt.Errorf("sso: the secret must be at least 32 bytes, got %d", len(secret))
	}
	key := func(label string) []byte {
		sum := sha256.Sum256(append([]byte("approvals sso "+label+"\x00"), secret...))
		return sum[:]
	}
	flow := securecookie.New(key("flow hash"), key("flow block")).SetSerializer(securecookie.JSONEncoder{})
	flow.MaxAge(int(FlowMaxAge / time.Second))
	block, err := aes.NewCipher(key("tokens"))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{flow: flow, token: aead}, nil
}

// EncodeFlow returns the value of the flow cookie name.
func (s *Sealer) EncodeFlow(name string, f Flow) (string, error) {
	v, err := s.flow.Encode(name, f)
	if err != nil {
		return "", fmt.Errorf("sso: seal the sign-in flow: %w", err)
	}
	return v, nil
}

// DecodeFlow opens the flow cookie's value; false when it is forged,
// older than FlowMaxAge or unreadable.
func (s *Sealer) DecodeFlow(name, value string) (Flow, bool) {
	var f Flow
	if value == "" || s.flow.Decode(name, value, &f) != nil || f.State == "" {
		return Flow{}, false
	}
	return f, true
}

// SealToken encrypts a token for the session row; "" stays "".
func (s *Sealer) SealToken(token string) string {
	if token == "" {
		return ""
	}
	nonce := make([]byte, s.token.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(s.token.Seal(nonce, nonce, []byte(token), nil))
}

// OpenToken decrypts what SealToken made; "" stays "".
func (s *Sealer) OpenToken(sealed string) (string, error) {
	if sealed == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(sealed)
	if err != nil || len(b) < s.token.NonceSize() {
		return "", errors.New("sso: a sealed token that is not one")
	}
	n := s.token.NonceSize()
	plain, err := s.token.Open(nil, b[:n], b[n:], nil)
	if err != nil {
		return "", errors.New("sso: a sealed token that does not open")
	}
	return string(plain), nil
}

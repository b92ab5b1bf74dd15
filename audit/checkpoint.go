package audit

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Checkpoint is the signed last line of an export: the seq the export
// continues (0: it starts at seq 1), the chain's seq and hash at its end,
// when it was written, and an Ed25519 signature over SignedBytes. Since is
// signed so that lines removed from the start of an export are seen too.
type Checkpoint struct {
	Since     int64
	Seq       int64
	Hash      Hash
	At        time.Time
	Signature []byte
}

// checkpointContext starts the signed bytes, so that a signature made for
// a checkpoint is never valid for any other message signed with the key.
const checkpointContext = "approvals audit checkpoint v1\n"

// SignedBytes is what the signature covers: the context line
// "approvals audit checkpoint v1" and a newline, then the canonical JSON
// {"at":"…","hash":"…","seq":N,"since":S}.
func (c Checkpoint) SignedBytes() []byte {
	out := []byte(checkpointContext)
	out = append(out, `{"at":`...)
	out = appendString(out, FormatTime(c.At))
	out = append(out, `,"hash":`...)
	out = appendString(out, c.Hash.String())
	out = append(out, `,"seq":`...)
	out = strconv.AppendInt(out, c.Seq, 10)
	out = append(out, `,"since":`...)
	out = strconv.AppendInt(out, c.Since, 10)
	return append(out, '}')
}

// SignCheckpoint signs, with key, an export of the links after since up to
// seq, whose hash is hash.
func SignCheckpoint(key ed25519.PrivateKey, since, seq int64, hash Hash, at time.Time) Checkpoint {
	c := Checkpoint{Since: since, Seq: seq, Hash: hash, At: at.UTC()}
	c.Signature = ed25519.Sign(key, c.SignedBytes())
	return c
}

// Verify reports whether the signature is pub's.
func (c Checkpoint) Verify(pub ed25519.PublicKey) bool {
	return len(c.Signature) == ed25519.SignatureSize && ed25519.Verify(pub, c.SignedBytes(), c.Signature)
}

// GenerateKey returns a new private key (its 32-byte seed) and its public
// key, both in standard base64.
func GenerateKey() (private, public string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", err
	}
	return base64.StdEncoding.EncodeToString(priv.Seed()), base64.StdEncoding.EncodeToString(pub), nil
}

// ParsePrivateKey reads a base64 Ed25519 private key: its 32-byte seed (as
// GenerateKey writes it) or the 64 bytes of seed and public key.
func ParsePrivateKey(s string) (ed25519.PrivateKey, error) {
	b, err := decodeBase64(s)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	switch len(b) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b), nil
	case ed25519.PrivateKeySize:
		key := ed25519.NewKeyFromSeed(b[:ed25519.SeedSize])
		if string(key[ed25519.SeedSize:]) != string(b[ed25519.SeedSize:]) {
			return nil, errors.New("private key: its second half is not the public key of its seed")
		}
		return key, nil
	}
	return nil, fmt.Errorf("private key: %d bytes; an Ed25519 private key has %d (or %d with its public key)",
		len(b), ed25519.SeedSize, ed25519.PrivateKeySize)
}

// ParsePublicKey reads a base64 Ed25519 public key (32 bytes).
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := decodeBase64(s)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key: %d bytes; an Ed25519 public key has %d", len(b), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// PublicKeyString is pub in standard base64.
func PublicKeyString(pub ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(pub) }

func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty")
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

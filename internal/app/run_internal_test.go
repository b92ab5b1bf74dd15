package app

import (
	"net"
	"testing"
)

// TestSetupLinkHostIsBrowsable: a server listening on every interface
// logs its setup link with localhost, not [::] or 0.0.0.0.
func TestSetupLinkHostIsBrowsable(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"[::]:8080":      "localhost:8080",
		"0.0.0.0:8080":   "localhost:8080",
		"127.0.0.1:8080": "127.0.0.1:8080",
		"[::1]:9000":     "[::1]:9000",
	}
	for in, want := range cases {
		addr, err := net.ResolveTCPAddr("tcp", in)
		if err != nil {
			t.Fatal(err)
		}
		if got := browsableAddr(addr); got != want {
			t.Errorf("browsableAddr(%s) = %s, want %s", in, got, want)
		}
	}
}

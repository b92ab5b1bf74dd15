package sso

import (
	"strings"
	"testing"

	"github.com/approvals/approvals/accounts"
)

func TestParseRoles(t *testing.T) {
	t.Parallel()
	m, err := ParseRoles(" approvals-admins=admin, support=approver ,*=viewer")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.String(); got != "approvals-admins=admin,support=approver,*=viewer" {
		t.Fatalf("String() = %s", got)
	}
	for _, tc := range []struct {
		groups []string
		want   accounts.Role
	}{
		{[]string{"support", "approvals-admins"}, accounts.RoleAdmin}, // the first rule that matches, not the first group
		{[]string{"support"}, accounts.RoleApprover},
		{[]string{"contractors"}, accounts.RoleViewer},
		{nil, accounts.RoleViewer},
	} {
		if got, ok := m.RoleFor(tc.groups); !ok || got != tc.want {
			t.Errorf("RoleFor(%v) = %s %v, want %s", tc.groups, got, ok, tc.want)
		}
	}
	// Without *, no match is no access.
	strict, err := ParseRoles("a=b=admin,support=approver")
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := strict.RoleFor([]string{"a=b"}); !ok || r != accounts.RoleAdmin {
		t.Errorf("a group with = in its name: %s %v", r, ok)
	}
	if r, ok := strict.RoleFor([]string{"contractors"}); ok {
		t.Errorf("RoleFor with no matching rule = %s, want no access", r)
	}
	for in, want := range map[string]string{
		"":                  "no GROUP=ROLE rules",
		"support":           "is not GROUP=ROLE",
		"=admin":            "names no group",
		"support=boss":      `role "boss" is not one of`,
		"a=admin,a=viewer":  "named twice",
		" , ,":              "no GROUP=ROLE rules",
		"support=approver,": "", // a trailing comma is fine
	} {
		_, err := ParseRoles(in)
		switch {
		case want == "" && err != nil:
			t.Errorf("ParseRoles(%q): %v", in, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("ParseRoles(%q) = %v, want an error saying %q", in, err, want)
		}
	}
}

func TestSealer(t *testing.T) {
	t.Parallel()
	s, err := NewSealer([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewSealer([]byte(strings.Repeat("o", 32)))
	sealed := s.SealToken("refresh-token")
	if sealed == "" || strings.Contains(sealed, "refresh-token") {
		t.Fatalf("sealed %q", sealed)
	}
	if got, err := s.OpenToken(sealed); err != nil || got != "refresh-token" {
		t.Fatalf("OpenToken = %q, %v", got, err)
	}
	if _, err := other.OpenToken(sealed); err == nil {
		t.Fatal("a token sealed under another secret opened")
	}
	if _, err := s.OpenToken(sealed[:len(sealed)-2] + "AA"); err == nil {
		t.Fatal("a changed sealed token opened")
	}
	if got, err := s.OpenToken(""); err != nil || got != "" {
		t.Fatalf("OpenToken(\"\") = %q, %v", got, err)
	}

	v, err := s.EncodeFlow("approvals_oidc", Flow{State: "st", Nonce: "n", Verifier: "v", Next: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(v, "st") && strings.Contains(v, "/x") {
		t.Fatalf("the flow cookie shows its content: %s", v)
	}
	if f, ok := s.DecodeFlow("approvals_oidc", v); !ok || f.State != "st" || f.Nonce != "n" || f.Verifier != "v" || f.Next != "/x" {
		t.Fatalf("DecodeFlow = %+v %v", f, ok)
	}
	for name, value := range map[string]string{"another name": v, "forged": v[:len(v)-3] + "abc", "empty": ""} {
		cookie := "approvals_oidc"
		if name == "another name" {
			cookie = "other"
		}
		if _, ok := s.DecodeFlow(cookie, value); ok {
			t.Errorf("%s: the flow cookie opened", name)
		}
	}
	if _, ok := other.DecodeFlow("approvals_oidc", v); ok {
		t.Error("a flow cookie of another secret opened")
	}
	if _, err := NewSealer([]byte("short")); err == nil {
		t.Error("a short secret was accepted")
	}
}

func TestNewChecksTheSettings(t *testing.T) {
	t.Parallel()
	roles, _ := ParseRoles("*=viewer")
	ok := Config{Issuer: "https://login.example.com", ClientID: "c", Roles: roles, RedirectURL: "https://a.example.com/auth/oidc/callback"}
	if _, err := New(ok); err != nil {
		t.Fatal(err)
	}
	for want, mutate := range map[string]func(*Config){
		"not an absolute https URL":     func(c *Config) { c.Issuer = "login.example.com" },
		"the issuer must be https":      func(c *Config) { c.Issuer = "http://login.example.com" },
		"APPROVALS_OIDC_CLIENT_ID":      func(c *Config) { c.ClientID = "" },
		"APPROVALS_OIDC_ROLES":          func(c *Config) { c.Roles = nil },
		"Config.RedirectURL":            func(c *Config) { c.RedirectURL = "" },
		"" /* loopback http is fine */ : func(c *Config) { c.Issuer = "http://127.0.0.1:5556/dex" },
	} {
		c := ok
		mutate(&c)
		_, err := New(c)
		switch {
		case want == "" && err != nil:
			t.Errorf("%+v: %v", c, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%+v: %v, want an error naming %s", c, err, want)
		}
	}
}

package main

import (
	"strings"
	"testing"
)

// TestHardeningSettings: each new setting's default, and a bad value is an
// error naming the setting and the bad entry. (t.Setenv: not parallel.)
func TestHardeningSettings(t *testing.T) {
	c, err := parseServeConfig([]string{"--addr", "127.0.0.1:9999"})
	if err != nil {
		t.Fatal(err)
	}
	if c.PublicURL != "http://127.0.0.1:9999" || len(c.TrustedProxies) != 0 || c.MetricsAddr != "" ||
		c.Waiters.Total != 1000 || c.Waiters.PerHolder != 100 {
		t.Fatalf("defaults: %+v", c)
	}
	for _, tc := range []struct{ env, value, want string }{
		{"APPROVALS_TRUSTED_PROXIES", "10.0.0.0/8, proxy.internal", `"proxy.internal"`},
		{"APPROVALS_TRUSTED_PROXIES", "10.0.0.0/40", `"10.0.0.0/40"`},
		{"APPROVALS_PUBLIC_URL", "approvals.example.com", "APPROVALS_PUBLIC_URL"},
		{"APPROVALS_PUBLIC_URL", "ftp://approvals.example.com", "APPROVALS_PUBLIC_URL"},
		{"APPROVALS_METRICS_ADDR", "9090", "APPROVALS_METRICS_ADDR"},
		{"APPROVALS_MAX_WAITERS", "many", "APPROVALS_MAX_WAITERS"},
		{"APPROVALS_MAX_WAITERS", "0", "APPROVALS_MAX_WAITERS"},
		{"APPROVALS_MAX_WAITERS", "10,20", "APPROVALS_MAX_WAITERS"},
	} {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			_, err := parseServeConfig(nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want one naming %s", err, tc.want)
			}
		})
	}
	t.Setenv("APPROVALS_PUBLIC_URL", "https://approvals.example.com")
	t.Setenv("APPROVALS_TRUSTED_PROXIES", "10.0.0.0/8,::1")
	t.Setenv("APPROVALS_MAX_WAITERS", "500,50")
	t.Setenv("APPROVALS_METRICS_ADDR", "127.0.0.1:9090")
	c, err = parseServeConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.PublicURL != "https://approvals.example.com" || len(c.TrustedProxies) != 2 || c.Waiters.Total != 500 ||
		c.Waiters.PerHolder != 50 || c.MetricsAddr != "127.0.0.1:9090" {
		t.Fatalf("settings: %+v", c)
	}
}

// TestUserAddOverLongInput: the CLI refuses an over-long email or password
// with a message naming it, and writes nothing.
func TestUserAddOverLongInput(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + t.TempDir() + "/approvals.db"
	for _, tc := range []struct{ name, email, password, want string }{
		{"email", strings.Repeat("a", 290) + "@example.com", "long enough password", "at most 254"},
		{"password", "ann@example.com", strings.Repeat("p", 100), "at most 72 bytes"},
	} {
		var out, errOut strings.Builder
		code := run(t.Context(), []string{"user", "add", "--database-url", db, "--email", tc.email, "--role", "viewer"},
			strings.NewReader(tc.password+"\n"), &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), tc.want) || len(errOut.String()) > 400 {
			t.Errorf("%s: exit %d, stderr %q; want a failure saying %q in a short message", tc.name, code, errOut.String(), tc.want)
		}
	}
}

package templates

import "net/url"

// LoginView is the login form.
type LoginView struct {
	Email  string
	Next   string
	Error  string
	Notice string
	// SSO offers "Sign in with SSO"; Password the password form
	// (APPROVALS_PASSWORD_LOGIN=off hides it).
	SSO, Password bool
}

// SSOURL starts a single sign-on that returns to Next.
func (v LoginView) SSOURL() string {
	if v.Next == "" {
		return "/auth/oidc/login"
	}
	return "/auth/oidc/login?next=" + url.QueryEscape(v.Next)
}

// SSORefusedView is a refused single sign-on: the reason's name (for
// tests and the audit log) and its plain words.
type SSORefusedView struct {
	Reason string
	Words  string
}

// SetupView is the one-time form that creates the first admin.
type SetupView struct {
	Token string
	Email string
	Error string
}

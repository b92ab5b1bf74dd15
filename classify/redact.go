package classify

import (
	"net/url"
	"regexp"
	"strings"
)

// Redacted replaces a credential in a URL shown to anyone.
const Redacted = "REDACTED"

// secretParamWords are the parts of a query parameter name that mark its
// value as a credential: token, access_token, api_key, apikey, secret,
// client_secret, password, sig, signature, auth, credential…
var secretParamWords = []string{"token", "key", "secret", "password", "passwd", "pwd", "sig", "auth", "credential", "session"}

// RedactURL returns raw with its credentials replaced by REDACTED: the
// user information (user:pass@, or a bare token@) and the value of every
// query parameter whose name contains token, key, secret, password, sig,
// auth, credential or session. Webhook and upstream URLs often carry such
// credentials; pages, events, API answers and logs show this instead. A
// text that does not parse as a URL is returned only when it cannot hold
// a credential (no @ and no ?); otherwise it is REDACTED whole.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if strings.ContainsAny(raw, "@?") {
			return Redacted
		}
		return raw
	}
	changed := false
	if u.User != nil {
		u.User = url.User(Redacted)
		changed = true
	}
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			u.RawQuery = Redacted
			changed = true
		} else {
			for name, vals := range q {
				if secretParam(name) {
					for i := range vals {
						vals[i] = Redacted
					}
					changed = true
				}
			}
			if changed {
				u.RawQuery = q.Encode()
			}
		}
	}
	// A fragment never reaches the server, yet some put tokens there.
	if u.Fragment != "" && secretParam(u.Fragment) {
		u.Fragment = Redacted
		changed = true
	}
	if !changed {
		return raw
	}
	return u.String()
}

func secretParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range secretParamWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// urlInText finds URLs in free text (an error message, a log line).
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// RedactURLsIn returns s with every URL in it passed through RedactURL:
// for error texts such as Go's `Post "https://…?token=…": dial tcp …`.
func RedactURLsIn(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlInText.ReplaceAllStringFunc(s, func(m string) string {
		// JSON written by encoding/json spells & as \u0026; read it as the
		// separator it is, so a credential after it is still found.
		plain := strings.ReplaceAll(m, `\u0026`, "&")
		r := RedactURL(plain)
		if r == plain {
			return m
		}
		if plain != m {
			r = strings.ReplaceAll(r, "&", `\u0026`)
		}
		return r
	})
}

// credentialPathHosts are the hosts whose webhook URLs carry their credential in the path:
// whoever has the URL can post as the hook (Slack incoming webhooks, Teams and Power
// Automate Workflows, Office 365 connectors, Discord).
var credentialPathHosts = []string{"hooks.slack.com", ".webhook.office.com", ".logic.azure.com", ".powerplatform.com", "discord.com", "discordapp.com"}

// CredentialPath reports whether raw is a URL whose path is its credential.
func CredentialPath(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return false
	}
	host := strings.ToLower(u.Hostname())
	for _, h := range credentialPathHosts {
		if host == strings.TrimPrefix(h, ".") || strings.HasPrefix(h, ".") && strings.HasSuffix(host, h) {
			return u.Path != "" && u.Path != "/"
		}
	}
	return false
}

// ShownURL is raw as a page shows it: RedactURL's, and for staff other than admins (admin
// false) with the path and query elided where the path is the credential
// ("https://hooks.slack.com/…").
func ShownURL(raw string, admin bool) string {
	shown := RedactURL(raw)
	if admin || !CredentialPath(raw) {
		return shown
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Redacted
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// ShownURLsIn is RedactURLsIn, and for staff other than admins ShownURL's elision of every
// URL whose path is its credential.
func ShownURLsIn(s string, admin bool) string {
	s = RedactURLsIn(s)
	if admin || !strings.Contains(s, "://") {
		return s
	}
	return urlInText.ReplaceAllStringFunc(s, func(m string) string {
		if CredentialPath(strings.ReplaceAll(m, `\u0026`, "&")) {
			return ShownURL(m, false)
		}
		return m
	})
}

package sso

import (
	"fmt"
	"net/http"
)

// Reason is why a single sign-on was refused.
type Reason string

// The reasons a sign-in is refused; each has its words and its status.
const (
	ReasonState           Reason = "state"
	ReasonCode            Reason = "code"
	ReasonAudience        Reason = "audience"
	ReasonIssuer          Reason = "issuer"
	ReasonSignature       Reason = "signature"
	ReasonExpired         Reason = "expired"
	ReasonNonce           Reason = "nonce"
	ReasonEmailUnverified Reason = "email_unverified"
	ReasonNoEmail         Reason = "no_email"
	ReasonNoRole          Reason = "no_role"
	ReasonUnreachable     Reason = "unreachable"
	ReasonProvider        Reason = "provider"
)

var reasons = map[Reason]struct {
	status int
	words  string
}{
	ReasonState: {http.StatusBadRequest, "This sign-in does not match the one your browser started: its state is missing, wrong, expired or was used already. " +
		"Start again from the sign-in page."},
	ReasonCode: {http.StatusBadRequest, "The identity provider refused the sign-in code: it was used already or has expired. " +
		"Start again from the sign-in page."},
	ReasonAudience: {http.StatusUnauthorized, "The identity provider's token was issued for another application (its audience is not this server's client id), " +
		"so it does not sign you in here."},
	ReasonIssuer: {http.StatusUnauthorized, "The token was issued by another identity provider (its issuer is not the one this server trusts), " +
		"so it does not sign you in here."},
	ReasonSignature: {http.StatusUnauthorized, "The identity provider's token is not signed by any of the provider's published keys, so it does not sign you in."},
	ReasonExpired:   {http.StatusUnauthorized, "The identity provider's token has expired. Start again from the sign-in page."},
	ReasonNonce: {http.StatusUnauthorized, "The identity provider's token belongs to another sign-in than the one your browser started (its nonce does not match). " +
		"Start again from the sign-in page."},
	ReasonEmailUnverified: {http.StatusForbidden, "Your identity provider has not verified your email address, so it cannot sign you in here. " +
		"Verify it with the provider, then try again."},
	ReasonNoEmail: {http.StatusForbidden, "Your identity provider sent no email address, and approvals knows staff by their email."},
	ReasonNoRole: {http.StatusForbidden, "Your identity provider's groups give you no role in approvals, so you cannot sign in. " +
		"Ask an admin to add you to one of the groups that give a role."},
	// Not a 5xx: approvals itself works; the provider does not answer.
	ReasonUnreachable: {http.StatusConflict, "The identity provider cannot be reached right now, so single sign-on cannot finish. Try again in a minute."},
	ReasonProvider:    {http.StatusForbidden, "The identity provider did not sign you in."},
}

// Status is the HTTP status of a refusal for this reason: always a 4xx.
func (r Reason) Status() int {
	if v, ok := reasons[r]; ok {
		return v.status
	}
	return http.StatusForbidden
}

// Words says what went wrong, in plain words for the person signing in.
func (r Reason) Words() string {
	if v, ok := reasons[r]; ok {
		return v.words
	}
	return "Single sign-on was refused."
}

// Refusal is a refused sign-in: the reason, and the detail an operator
// reads in the audit log.
type Refusal struct {
	Reason Reason
	Detail string
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("single sign-on refused (%s): %s", r.Reason, r.Detail)
}

func refuse(reason Reason, format string, args ...any) *Refusal {
	return &Refusal{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

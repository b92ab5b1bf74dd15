package accounts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// StaffEvent is an event about staff and agent tokens rather than an
// action: a sign-in or a refused one, a user or token change. It is
// written to the events table beside the actions' timelines (with no
// action and a subject), so the audit chain seals it like every other
// event, and the audit page lists it.
type StaffEvent struct {
	Kind string
	// Actor is who did it: user:EMAIL on the dashboard, cli:OSUSER for a
	// command, anonymous for a refused sign-in.
	Actor string
	// Subject is what it is about: UserSubject or TokenSubject.
	Subject string
	// Channel is where it happened: ChannelDashboard, ChannelCLI, ...
	Channel string
	At      time.Time
	// Data is a JSON object with the details, or nil.
	Data json.RawMessage
}

// Kinds of staff events.
const (
	EventLogin           = "login"
	EventLoginRefused    = "login_refused"
	EventLogout          = "logout"
	EventUserAdded       = "user_added"
	EventUserUpdated     = "user_updated" // approvals user add --update: password, role and Slack id at once
	EventUserRemoved     = "user_removed"
	EventRoleChanged     = "role_changed"
	EventPasswordChanged = "password_changed"
	EventSlackIDChanged  = "slack_id_changed"
	EventTokenCreated    = "token_created"
	EventTokenRevoked    = "token_revoked"
)

// StaffEventKinds lists every kind above (the audit page's filter).
var StaffEventKinds = []string{EventLogin, EventLoginRefused, EventLogout, EventUserAdded, EventUserUpdated,
	EventUserRemoved, EventRoleChanged, EventPasswordChanged, EventSlackIDChanged, EventTokenCreated, EventTokenRevoked}

// Where staff events happen.
const (
	ChannelDashboard = "dashboard"
	ChannelCLI       = "cli"
	ChannelSetup     = "setup" // the one-time setup link
	ChannelSSO       = "sso"
)

// Sign-in methods and the reason a password sign-in is refused.
const (
	LoginPassword = "password"
	LoginSSO      = "sso"
	// LoginBadCredentials: an unknown email or a wrong password, which the
	// record does not tell apart, as the sign-in page does not.
	LoginBadCredentials = "bad_credentials"
)

// ActorAnonymous is the actor of a refused sign-in: nobody proved who
// they are.
const ActorAnonymous = "anonymous"

// UserSubject is the subject (and, signed in, the actor) naming a staff
// user.
func UserSubject(email string) string { return "user:" + email }

// TokenSubject is the subject naming an agent token.
func TokenSubject(name string) string { return "token:" + name }

// RecordStaffEvent writes one staff event; every face (dashboard, CLI,
// SSO) records its changes through it, right after the change committed.
// Subject and actor are cleaned of what no store keeps (control
// characters, bytes that are not UTF-8), since a refused sign-in records
// whatever address was typed.
func RecordStaffEvent(ctx context.Context, st Store, ev StaffEvent) error {
	ev.Subject, ev.Actor, ev.Channel = printable(ev.Subject), printable(ev.Actor), printable(ev.Channel)
	switch {
	case ev.Kind == "":
		return errors.New("record staff event: no kind")
	case ev.Subject == "":
		return fmt.Errorf("record %s event: no subject", ev.Kind)
	case ev.Actor == "":
		return fmt.Errorf("record %s event: no actor", ev.Kind)
	}
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	ev.At = ev.At.UTC()
	if err := st.StaffEventInsert(ctx, ev); err != nil {
		return fmt.Errorf("record %s event of %s: %w", ev.Kind, ev.Subject, err)
	}
	return nil
}

// Login is one sign-in attempt, by password or SSO.
type Login struct {
	// Email is the address signed in as, or tried.
	Email string
	// Method is LoginPassword or LoginSSO.
	Method string
	// Refused is "" for a sign-in that succeeded, else why it was refused
	// (LoginBadCredentials, or a reason code of the SSO's own).
	Refused string
	// Addr is the client's address.
	Addr string
	At   time.Time
	// Details are recorded beside the method (an SSO's issuer, say).
	Details map[string]string
}

// RecordLogin records a sign-in (login, by the user) or a refused one
// (login_refused, by anonymous), with the method, the client address and
// the reason in its data. The SSO sign-in calls it as the password form
// does, with Method LoginSSO and ChannelSSO as its channel.
func RecordLogin(ctx context.Context, st Store, l Login) error {
	data := map[string]string{}
	for k, v := range l.Details {
		data[k] = v
	}
	data["method"] = l.Method
	if l.Addr != "" {
		data["addr"] = l.Addr
	}
	ev := StaffEvent{Kind: EventLogin, Actor: UserSubject(l.Email), Subject: UserSubject(l.Email),
		Channel: ChannelDashboard, At: l.At}
	if l.Method == LoginSSO {
		ev.Channel = ChannelSSO
	}
	if l.Refused != "" {
		ev.Kind, ev.Actor = EventLoginRefused, ActorAnonymous
		data["reason"] = l.Refused
	}
	ev.Data = StaffData(data)
	return RecordStaffEvent(ctx, st, ev)
}

// StaffData is the JSON of a staff event's details.
func StaffData(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // maps of strings and plain values always encode
	}
	return b
}

// printable keeps s's printable characters: a control character or a
// byte that is not UTF-8 becomes U+FFFD, so that what was typed is still
// recognisable and every store can keep it.
func printable(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '\uFFFD'
		}
		return r
	}, s)
}

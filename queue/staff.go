package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/approvals/approvals/classify"
)

// StaffDirectory is the port through which the rules of deciding learn
// what they know of a staff member beyond the email: the identity
// provider's groups as of their last sign-in, and whether the provider
// still lets them in. storage.StaffDirectory reads the accounts.
type StaffDirectory interface {
	// StaffMember returns what is known of the person with this email; an
	// unknown email is a person in no identity provider group, not an error.
	StaffMember(ctx context.Context, email string) (StaffMember, error)
}

// StaffMember is what the rules of deciding know of a person.
type StaffMember struct {
	// IdPGroups are the identity provider's groups at their last single
	// sign-on (or recheck); none for a password user.
	IdPGroups []string
	// NoAccess says the identity provider refused them at their last
	// sign-in attempt (their groups map to no role): they decide nothing.
	NoAccess bool
}

// Decider is the maker of a decision as the rules of deciding see them.
type Decider struct {
	By        string // user:EMAIL
	IdPGroups []string
	NoAccess  bool
}

// Person is the decider as the tools file's approval rules see them.
func (d Decider) Person() classify.Person {
	return classify.Person{Email: strings.TrimPrefix(d.By, "user:"), IdPGroups: d.IdPGroups}
}

// Decider returns the person behind by (user:EMAIL) with what the staff
// directory knows of them: every face (dashboard, bulk, Slack, the queue's
// "waiting for me") decides through it, so the identity provider's groups
// count wherever a decision is made.
func (st Staff) Decider(ctx context.Context, by string) (Decider, error) {
	s := st.s
	d := Decider{By: by}
	if s.opts.Staff == nil || !strings.HasPrefix(by, "user:") {
		return d, nil
	}
	m, err := s.opts.Staff.StaffMember(ctx, strings.TrimPrefix(by, "user:"))
	if err != nil {
		return d, fmt.Errorf("look up %s: %w", by, err)
	}
	d.IdPGroups, d.NoAccess = m.IdPGroups, m.NoAccess
	return d, nil
}

// StaffEvent is an event about staff rather than an action: a sign-in or
// a refused one, a sign-out, a change of a user or an agent token. It goes
// to the events log beside the actions' events, with no action and the
// subject it is about, is sealed into the audit chain like every other
// event (package audit), and /audit lists it.
type StaffEvent struct {
	Kind  string // EventSignedIn, EventUserAdded, …
	Actor string // user:EMAIL, cli:OSUSER, or "anonymous" before anyone is known
	// Subject is what it is about (UserSubject, TokenSubject); "" when
	// nothing is known beyond the actor.
	Subject string
	Channel string // how or where: "password", "sso", "dashboard", "cli", "setup"
	Data    map[string]any
}

// Staff event kinds.
const (
	EventSignedIn      = "signed_in"
	EventSignInRefused = "sign_in_refused"
	EventSignedOut     = "signed_out"
	EventUserAdded     = "user_added"
	// EventUserUpdated is approvals user add --update: password, role and
	// Slack id at once.
	EventUserUpdated     = "user_updated"
	EventUserRemoved     = "user_removed"
	EventRoleChanged     = "role_changed"
	EventPasswordChanged = "password_changed"
	EventSlackIDChanged  = "slack_id_changed"
	EventTokenCreated    = "token_created"
	EventTokenRevoked    = "token_revoked"
)

// StaffEventKinds lists every staff event kind (the audit page's filter).
var StaffEventKinds = []string{EventSignedIn, EventSignInRefused, EventSignedOut, EventUserAdded, EventUserUpdated,
	EventUserRemoved, EventRoleChanged, EventPasswordChanged, EventSlackIDChanged, EventTokenCreated, EventTokenRevoked}

// ActorAnonymous is the actor of a refused sign-in by someone not yet
// known: nobody proved who they are.
const ActorAnonymous = "anonymous"

// UserSubject names a staff user as a staff event's subject.
func UserSubject(email string) string { return "user:" + email }

// TokenSubject names an agent token as a staff event's subject.
func TokenSubject(name string) string { return "token:" + name }

// Record writes a staff event to the events log, now. It is the
// one place staff events are recorded (the password and SSO sign-ins, the
// dashboard's user and token pages, the commands), each right after the
// change it records committed, so that the audit log sees every one.
// Actor, subject and channel keep their printable characters (a control
// character or a byte that is not UTF-8 becomes U+FFFD): a refused sign-in
// records whatever address was typed, and every store must keep it.
func (st Staff) Record(ctx context.Context, ev StaffEvent) error {
	s := st.s
	ev.Actor, ev.Subject, ev.Channel = printable(ev.Actor), printable(ev.Subject), printable(ev.Channel)
	switch {
	case ev.Kind == "":
		return errors.New("record a staff event: no kind")
	case ev.Actor == "":
		return fmt.Errorf("record %s: no actor", ev.Kind)
	}
	var data json.RawMessage
	if len(ev.Data) > 0 {
		var err error
		if data, err = json.Marshal(ev.Data); err != nil {
			return fmt.Errorf("record %s: %w", ev.Kind, err)
		}
	}
	return s.store.StaffEventInsert(ctx, Event{Subject: ev.Subject, Kind: ev.Kind, Actor: ev.Actor, Channel: ev.Channel,
		At: s.Now(), Data: data, Unrouted: true})
}

// printable keeps s's printable characters, putting U+FFFD for the rest.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// Staff are the rules about staff members: who may decide, and the record
// of their sign-ins and account changes.
type Staff struct{ s *Service }

// Staff returns the rules about staff members.
func (s *Service) Staff() Staff { return Staff{s} }

package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

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
func (s *Service) Decider(ctx context.Context, by string) (Decider, error) {
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

// StaffEvent is an event about staff rather than an action: a sign-in, or
// a refused one. It goes to the events log beside the actions' events,
// with no action, and /audit lists it.
type StaffEvent struct {
	Kind    string // EventSignedIn, EventSignInRefused
	Actor   string // user:EMAIL, or "anonymous" before anyone is known
	Channel string // how: "sso", "password"
	Data    map[string]any
}

// Staff event kinds.
const (
	EventSignedIn      = "signed_in"
	EventSignInRefused = "sign_in_refused"
)

// RecordStaffEvent writes a staff event to the events log, now. It is the
// one place staff events are recorded, so that the audit log sees every
// sign-in, whichever way it came.
func (s *Service) RecordStaffEvent(ctx context.Context, ev StaffEvent) error {
	var data json.RawMessage
	if len(ev.Data) > 0 {
		var err error
		if data, err = json.Marshal(ev.Data); err != nil {
			return fmt.Errorf("record %s: %w", ev.Kind, err)
		}
	}
	return s.store.StaffEventInsert(ctx, Event{Kind: ev.Kind, Actor: ev.Actor, Channel: ev.Channel,
		At: s.Now(), Data: data, Unrouted: true})
}

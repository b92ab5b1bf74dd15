package storage

import (
	"context"
	"errors"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/queue"
)

// StaffDirectory tells the rules of deciding (queue.StaffDirectory) what
// the accounts know of a person: their identity provider groups as of
// their last single sign-on, and whether the provider has refused them
// since.
type StaffDirectory struct {
	Accounts accounts.Store
}

// StaffMember implements queue.StaffDirectory.
func (d StaffDirectory) StaffMember(ctx context.Context, email string) (queue.StaffMember, error) {
	u, err := d.Accounts.UserGetByEmail(ctx, email)
	if errors.Is(err, accounts.ErrNotFound) {
		return queue.StaffMember{}, nil
	}
	if err != nil {
		return queue.StaffMember{}, err
	}
	return queue.StaffMember{IdPGroups: u.IdPGroups, NoAccess: u.SSODeniedAt != nil}, nil
}

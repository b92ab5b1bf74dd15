package handlers

import (
	"fmt"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/accounts"
)

// recordStaff records a staff change made on the dashboard by the user
// signed in (accounts.RecordStaffEvent), right after it committed. If the
// record cannot be written the request fails (the change stands and the
// error is logged), so that no change passes unseen.
func (d *Dashboard) recordStaff(c echo.Context, ev accounts.StaffEvent) error {
	if ev.Actor == "" {
		ev.Actor = actor(currentUser(c))
	}
	if ev.Channel == "" {
		ev.Channel = accounts.ChannelDashboard
	}
	if ev.At.IsZero() {
		ev.At = d.Service.Now()
	}
	if err := accounts.RecordStaffEvent(c.Request().Context(), d.Accounts, ev); err != nil {
		return fmt.Errorf("%s of %s was made, but its audit event was not recorded: %w", ev.Kind, ev.Subject, err)
	}
	return nil
}

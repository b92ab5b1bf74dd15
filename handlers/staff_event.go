package handlers

import (
	"fmt"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/queue"
)

// recordStaff records a staff change made on the dashboard by the user
// signed in (queue.Service.Staff().Record), right after it committed. If
// the record cannot be written the request fails (the change stands and
// the error is logged), so that no change passes unseen.
func (d *Dashboard) recordStaff(c echo.Context, ev queue.StaffEvent) error {
	if ev.Actor == "" {
		ev.Actor = actor(currentUser(c))
	}
	if ev.Channel == "" {
		ev.Channel = "dashboard"
	}
	if err := d.Service.Staff().Record(c.Request().Context(), ev); err != nil {
		return fmt.Errorf("%s of %s was made, but its audit event was not recorded: %w", ev.Kind, ev.Subject, err)
	}
	return nil
}

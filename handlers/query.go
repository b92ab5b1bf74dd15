package handlers

import (
	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/agentapi"
)

// OnlyQuery refuses a request whose query string holds a parameter outside
// names, or one twice (400 invalid_request naming it): a parameter this
// server does not know is never silently ignored, so a client asking an
// older server for ?dry_run=true gets a refusal, not a real submission.
func OnlyQuery(names ...string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if err := agentapi.CheckQuery(c.Request().URL.RawQuery, names...); err != nil {
				return err
			}
			return next(c)
		}
	}
}

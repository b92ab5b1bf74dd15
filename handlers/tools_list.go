package handlers

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// ToolsList handles GET /tools: the registry with each tool's class and why.
func (d *Dashboard) ToolsList(c echo.Context) error {
	reg := d.Service.Registry()
	p, err := d.page(c, "Tools", "tools")
	if err != nil {
		return err
	}
	now := d.Service.Now()
	hits, err := d.Store.PolicyHits(c.Request().Context(), queue.PolicyHitsParams{Day: now.Add(-24 * time.Hour), Week: now.Add(-7 * 24 * time.Hour)})
	if err != nil {
		return err
	}
	byRule := map[string]map[string]queue.PolicyHit{}
	for _, h := range hits {
		if byRule[h.Tool] == nil {
			byRule[h.Tool] = map[string]queue.PolicyHit{}
		}
		byRule[h.Tool][h.Rule] = h
	}
	return render(c, http.StatusOK, templates.ToolsPage(p, templates.ToolsView{Tools: reg.Tools(), Hash: reg.Hash, ShowURLPaths: isAdmin(c), Hits: byRule}))
}

// isAdmin reports whether the signed-in user is an admin, who sees URLs
// whose path is a credential whole.
func isAdmin(c echo.Context) bool {
	u := currentUser(c)
	return u != nil && u.Role.CanAdminister()
}

package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/templates"
)

// ToolsList handles GET /tools: the registry with each tool's class and why.
func (d *Dashboard) ToolsList(c echo.Context) error {
	reg := d.Service.Registry()
	p, err := d.page(c, "Tools", "tools")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.ToolsPage(p, templates.ToolsView{Tools: reg.Tools(), Hash: reg.Hash, ShowURLPaths: isAdmin(c)}))
}

// isAdmin reports whether the signed-in user is an admin, who sees URLs
// whose path is a credential whole.
func isAdmin(c echo.Context) bool {
	u := currentUser(c)
	return u != nil && u.Role.CanAdminister()
}

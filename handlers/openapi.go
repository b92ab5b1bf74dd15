package handlers

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// OpenAPIDocument is the OpenAPI 3.1 description of the agent API.
//
//go:embed openapi.json
var OpenAPIDocument []byte

// OpenAPI serves the document without authentication.
func OpenAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, OpenAPIDocument)
}

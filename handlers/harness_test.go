package handlers_test

import "github.com/approvals/approvals/internal/apptest"

// The answers of the harness (apptest), as these tests name them.
type (
	page = apptest.Page
	resp = apptest.Resp
)

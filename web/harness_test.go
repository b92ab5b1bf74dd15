package web_test

import "github.com/approvals/approvals/internal/apptest"

// The answer of the harness (apptest), as these tests name it.
type page = apptest.Page

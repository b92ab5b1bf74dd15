package templates

// LoginView is the login form.
type LoginView struct {
	Email string
	Next  string
	Error string
}

// SetupView is the one-time form that creates the first admin.
type SetupView struct {
	Token string
	Email string
	Error string
}

package web

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// DefaultBodyReadTimeout bounds how long a client may take to send a
// request body.
const DefaultBodyReadTimeout = 30 * time.Second

// bodyReadTimeout gives a request d to send its body, then lifts the
// deadline once the body is read. http.Server's ReadTimeout cannot do
// this: its deadline outlives the body, and when it passes during a
// long-poll or an event stream Go cancels the request's context. A slow
// sender (one byte a minute) otherwise holds a connection and a goroutine
// as long as it likes.
func bodyReadTimeout(d time.Duration) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
				return next(c)
			}
			rc := http.NewResponseController(c.Response())
			if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
				return next(c) // a writer without deadlines (tests' recorders)
			}
			r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
			return next(c)
		}
	}
}

// deadlineBody lifts the read deadline once the body is read to its end
// or closed.
type deadlineBody struct {
	io.ReadCloser
	once sync.Once
	lift func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.once.Do(b.lift)
	}
	return n, err
}

func (b *deadlineBody) Close() error {
	b.once.Do(b.lift)
	return b.ReadCloser.Close()
}

package handlers

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/approvals/approvals/agentapi"
	"github.com/approvals/approvals/longpoll"
	"github.com/approvals/approvals/problem"
	"github.com/approvals/approvals/queue"
)

// GetAction handles GET /api/v1/actions/{id}, with the ?wait long-poll.
//
// A long-poll leaves net/http once it is authenticated and its query is
// valid: the handler hijacks the connection and returns, and one small
// goroutine reads the action and, when it must wait, reads the connection
// (to see the client leave) under a read deadline that a change of the
// action, shutdown, the recheck or the deadline ends. Held by net/http
// instead, each waiting poll kept two goroutines and the connection's
// buffers (about 34 KB), and a burst of polls queueing for a database
// connection kept them too: ten thousand polls came to over 300 MiB. The
// answer closes the connection (Connection: close), since net/http serves
// it no more. HTTP/2 and writers that cannot be hijacked (tests'
// recorders) wait in the handler, as before.
func (h *API) GetAction(c echo.Context) error {
	wait, err := agentapi.ParseWait(c.QueryParam("wait"))
	if err != nil {
		return err
	}
	until, err := agentapi.ParseState(c.QueryParam("state"))
	if err != nil {
		return err
	}
	ctx, id := c.Request().Context(), c.Param("id")
	if wait <= 0 {
		a, err := h.Polls.Wait(ctx, id, until, 0)
		if err != nil {
			return err
		}
		return writeJSON(c, http.StatusOK, a)
	}
	release, err := h.Polls.AcquireWaiter("agent:" + agent(c))
	if err != nil {
		return err
	}
	// The slot is given back before the answer is written (release may
	// be called again), so an agent that asks again as soon as it reads
	// the answer is not refused.
	if conn, answer, ok := h.detach(c); ok {
		held := h.Polls.HoldWait()
		go func() {
			defer held()
			defer conn.Close()
			defer release()
			// A wake ends the connection's read below at once.
			wake := func() { _ = conn.SetReadDeadline(aLongTimeAgo) }
			rctx, cancel := context.WithTimeout(context.Background(), detachedReadTimeout)
			a, p, err := h.Polls.StartPoll(rctx, id, until, wait, wake)
			cancel()
			if p != nil {
				defer p.Close()
				var left bool
				if a, left, err = waitOnConn(conn, p); left {
					return // the client left: nobody reads an answer
				}
			}
			release()
			answer(a, err)
		}()
		return nil
	}
	defer release() // on a panic
	a, err := h.Polls.Wait(ctx, id, until, wait)
	release()
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, a)
}

// aLongTimeAgo is a read deadline in the past: it ends a read at once.
var aLongTimeAgo = time.Unix(1, 0)

const (
	// detachedReadTimeout bounds each read of a detached poll's action,
	// which has no request context to end it.
	detachedReadTimeout = 30 * time.Second
	// detachedWriteTimeout bounds the writing of a detached poll's answer.
	detachedWriteTimeout = 10 * time.Second
)

// detach hijacks the connection of c and returns it with the function that
// writes the answer to it; false when the connection cannot be hijacked
// (HTTP/2, a recorder), and the caller answers through echo instead. What
// detach returns does not touch c, which echo reuses once the handler
// returns.
func (h *API) detach(c echo.Context) (net.Conn, func(*queue.Action, error), bool) {
	if c.Request().ProtoMajor != 1 {
		return nil, nil, false
	}
	conn, _, err := http.NewResponseController(c.Response()).Hijack()
	if err != nil {
		return nil, nil, false
	}
	// What the middleware set (the security headers) goes out with the answer.
	header := c.Response().Header().Clone()
	path := c.Request().URL.Path
	// echo keeps its contexts in a pool that lets go of them only after
	// two garbage collections: left as it is, c would hold net/http's
	// response, and through it the connection's buffers, that long.
	c.SetResponse(echo.NewResponse(hijackedWriter{}, c.Echo()))
	answer := func(a *queue.Action, err error) {
		r := agentapi.NewAnswer(header)
		if err != nil {
			var qe *queue.Error
			if !errors.As(err, &qe) {
				qe = queue.ErrorOf(context.Background(), err, h.Store, h.Logger, "method", http.MethodGet, "path", path)
			}
			_ = problem.Write(r, qe)
		} else {
			r.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
			r.WriteHeader(http.StatusOK)
			if err := writeActionTo(r.Body(), a); err != nil {
				queue.ErrorOf(context.Background(), err, h.Store, h.Logger, "method", http.MethodGet, "path", path)
				return
			}
		}
		_ = conn.SetWriteDeadline(time.Now().Add(detachedWriteTimeout))
		_ = r.WriteResponse(conn)
	}
	return conn, answer, true
}

// waitOnConn waits for p on a hijacked connection: left is true when the
// client closed it (or it failed) first. Bytes the client sends meanwhile
// (a pipelined request) are read and dropped; the answer closes the
// connection, so the client sends them again.
func waitOnConn(conn net.Conn, p *longpoll.Poll) (a *queue.Action, left bool, err error) {
	var buf [256]byte
	for {
		// The deadline first, then the check: a wake after the check ends
		// the read below at once, and one before it is seen by the check.
		_ = conn.SetReadDeadline(p.Next())
		ctx, cancel := context.WithTimeout(context.Background(), detachedReadTimeout)
		a, done, err := p.Check(ctx)
		cancel()
		if done || err != nil {
			return a, false, err
		}
		if _, err := conn.Read(buf[:]); err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return nil, true, nil
			}
		}
	}
}

// hijackedWriter stands in for the response of a hijacked connection in
// the echo context the handler returns; nothing writes to it.
type hijackedWriter struct{}

func (hijackedWriter) Header() http.Header         { return http.Header{} }
func (hijackedWriter) Write(b []byte) (int, error) { return 0, http.ErrHijacked }
func (hijackedWriter) WriteHeader(int)             {}

package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// streamRecheck paces the keep-alive comment of an event stream and the
// re-check of its session, so a stream ends soon after a logout.
const streamRecheck = 20 * time.Second

// Events handles GET /events: a server-sent event for every change of an
// action made by any server process (the store's notifications), so open
// queues reload their table within a second, with no polling.
func (d *Dashboard) Events(c echo.Context) error {
	release, err := d.Polls.AcquireStream(actor(currentUser(c)))
	if err != nil {
		return err
	}
	defer release()
	sub := d.Store.SubscribePending()
	defer sub.Cancel()
	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 2000\n: live\n\n"); err != nil {
		return nil
	}
	w.Flush()
	tick := time.NewTicker(streamRecheck)
	defer tick.Stop()
	ctx := c.Request().Context()
	for {
		select {
		case ch, ok := <-sub.Changes:
			if !ok {
				return nil
			}
			data, _ := json.Marshal(map[string]string{"id": ch.ActionID, "state": string(ch.State)})
			if _, err := fmt.Fprintf(w, "event: change\ndata: %s\n\n", data); err != nil {
				return nil
			}
		case <-tick.C:
			if !d.stillSignedIn(c) {
				return nil
			}
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return nil
			}
		case <-d.Done:
			return nil
		case <-ctx.Done():
			return nil
		}
		w.Flush()
	}
}

package queue

import "sync"

// Hub fans changes out to the subscribers of one process. Stores feed it:
// SQLite after each commit, PostgreSQL from LISTEN, so that changes made by
// any process reach every waiter.
type Hub struct {
	mu     sync.Mutex
	subs   map[chan Change]struct{}
	closed bool
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{subs: make(map[chan Change]struct{})} }

// Publish delivers c to every subscriber without blocking. A subscriber whose
// buffer is full misses it; waiters therefore also re-read on a slow timer.
func (h *Hub) Publish(c Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- c:
		default:
		}
	}
}

// Subscribe registers a subscriber until its Cancel is called or the hub closes.
func (h *Hub) Subscribe() Subscription {
	ch := make(chan Change, 64)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(ch)
		return Subscription{Changes: ch, Cancel: func() {}}
	}
	h.subs[ch] = struct{}{}
	var once sync.Once
	return Subscription{Changes: ch, Cancel: func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if _, ok := h.subs[ch]; ok {
				delete(h.subs, ch)
				close(ch)
			}
		})
	}}
}

// Close closes every subscriber's channel, releasing waiters on shutdown.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
}

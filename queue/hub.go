package queue

import "sync"

// Hub fans changes out to the subscribers of one process. Stores feed it:
// SQLite after each commit, PostgreSQL from LISTEN, so that changes made by
// any process reach every waiter. A subscriber of every change (the
// dashboard's streams, the dispatcher, the outbox) costs each change one
// send; a subscriber of one action (a long-poll) costs only that action's
// changes, so ten thousand long-polls do not make every change ten
// thousand sends.
type Hub struct {
	mu     sync.Mutex
	subs   map[chan Change]struct{}
	byID   map[string]map[chan Change]func()
	closed bool
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{subs: make(map[chan Change]struct{}), byID: make(map[string]map[chan Change]func())}
}

// Publish delivers c to every subscriber of all changes and of c's action
// without blocking. A subscriber whose buffer is full misses it; waiters
// therefore also re-read on a slow timer.
func (h *Hub) Publish(c Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- c:
		default:
		}
	}
	for ch, wake := range h.byID[c.ActionID] {
		select {
		case ch <- c:
		default: // one change already waits: the subscriber re-reads the action anyway
		}
		if wake != nil {
			wake()
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

// SubscribeAction registers a subscriber of the changes of action id
// only, until its Cancel is called or the hub closes. Its buffer holds one
// change: a waiter re-reads the action on any change, so two changes that
// arrive together wake it once. wake, when not nil, is called after each
// delivery and when the hub closes, under the hub's lock, so it must not
// block: it lets a long-poll that holds no goroutine of its own (a
// detached one, see longpoll.Poll) be woken.
func (h *Hub) SubscribeAction(id string, wake func()) Subscription {
	ch := make(chan Change, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(ch)
		return Subscription{Changes: ch, Cancel: func() {}}
	}
	set := h.byID[id]
	if set == nil {
		set = make(map[chan Change]func(), 1)
		h.byID[id] = set
	}
	set[ch] = wake
	var once sync.Once
	return Subscription{Changes: ch, Cancel: func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if set, ok := h.byID[id]; ok {
				if _, ok := set[ch]; ok {
					delete(set, ch)
					close(ch)
					if len(set) == 0 {
						delete(h.byID, id)
					}
				}
			}
		})
	}}
}

// WakeActions delivers a change to every subscriber of one action, as if
// each action had changed: a store calls it when changes may have been
// lost (PostgreSQL's listener reconnected), so that every long-poll reads
// its action again at once instead of at its slow recheck.
func (h *Hub) WakeActions() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, set := range h.byID {
		for ch, wake := range set {
			select {
			case ch <- Change{ActionID: id}:
			default:
			}
			if wake != nil {
				wake()
			}
		}
	}
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
	for id, set := range h.byID {
		for ch, wake := range set {
			close(ch)
			if wake != nil {
				wake()
			}
		}
		delete(h.byID, id)
	}
}

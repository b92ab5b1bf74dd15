package accounts

import "sync"

// TokenCache remembers the agent names of tokens seen valid, by hash. It is
// never trusted alone: a face that takes a name from it must have the store
// check the token in the statement that acts (queue.Store.SupportsTokenGuard)
// or look the token up before anything else is done, and Remove it once a
// check refuses it. The zero value is ready to use.
type TokenCache struct {
	mu sync.Mutex
	m  map[string]string
}

// Get returns the agent name remembered for hash.
func (t *TokenCache) Get(hash string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	name, ok := t.m[hash]
	return name, ok
}

// Put remembers that the token with hash is agent name's.
func (t *TokenCache) Put(hash, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil || len(t.m) >= 1024 {
		t.m = make(map[string]string) // agents are few; start over
	}
	t.m[hash] = name
}

// Remove forgets hash, after a check refused its token.
func (t *TokenCache) Remove(hash string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, hash)
}

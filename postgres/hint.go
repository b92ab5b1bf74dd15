package postgres

import (
	"hash/maphash"
	"sync"
)

// heldHint remembers intent keys this process recently saw held, so that
// a resubmission of one can try the cheap replay lookup (replayLookupSQL)
// before the full claiming statement. It is only a guess: a key released
// since, held by another process or forgotten costs nothing but the usual
// statement, because the lookup reports "no holder" and the submission
// then claims as always. Correctness never depends on it.
//
// Memory is bounded: keys are kept as 64-bit hashes (a collision only
// sends a new key down the lookup first) in two generations of at most
// perGen entries each; when the current one fills, it becomes the previous
// one and the oldest generation is dropped. About 40 bytes per entry, so
// 2×32768 entries stay under 3 MiB whatever the keys' length.
type heldHint struct {
	seed   maphash.Seed
	perGen int
	mu     sync.Mutex
	cur    map[uint64]struct{}
	prev   map[uint64]struct{}
}

const hintPerGeneration = 1 << 15

func newHeldHint(perGen int) *heldHint {
	return &heldHint{seed: maphash.MakeSeed(), perGen: perGen, cur: make(map[uint64]struct{})}
}

func (h *heldHint) sum(key string) uint64 { return maphash.String(h.seed, key) }

// has reports whether key was recently seen held.
func (h *heldHint) has(key string) bool {
	k := h.sum(key)
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.cur[k]; ok {
		return true
	}
	_, ok := h.prev[k]
	return ok
}

// add records that key is held.
func (h *heldHint) add(key string) {
	k := h.sum(key)
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.cur[k]; ok {
		return
	}
	if len(h.cur) >= h.perGen {
		h.prev, h.cur = h.cur, make(map[uint64]struct{}, h.perGen)
	}
	h.cur[k] = struct{}{}
}

// forget drops key, after a lookup found it no longer held.
func (h *heldHint) forget(key string) {
	k := h.sum(key)
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.cur, k)
	delete(h.prev, k)
}

// size is the number of keys remembered (for tests).
func (h *heldHint) size() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.cur) + len(h.prev)
}

package postgres

import (
	"fmt"
	"testing"
)

// TestHeldHint: keys are remembered until forgotten, and the hint never
// holds more than two generations of keys however many it is given.
func TestHeldHint(t *testing.T) {
	h := newHeldHint(4)
	if h.has("a") {
		t.Fatal("empty hint has a")
	}
	h.add("a")
	h.add("a")
	if !h.has("a") || h.size() != 1 {
		t.Fatalf("after adding a twice: has=%v size=%d, want true 1", h.has("a"), h.size())
	}
	h.forget("a")
	if h.has("a") {
		t.Fatal("a still hinted after forget")
	}
	for i := range 100 {
		h.add(fmt.Sprint("k", i))
		if n := h.size(); n > 8 {
			t.Fatalf("after %d keys the hint holds %d, want at most 2 generations of 4", i+1, n)
		}
	}
	// The newest keys are kept, the oldest dropped.
	if !h.has("k99") || !h.has("k96") {
		t.Error("the newest keys were dropped")
	}
	if h.has("k0") {
		t.Error("the oldest key is still hinted")
	}
	// A key in the previous generation is found and can be forgotten.
	old := ""
	for i := 99; i >= 0; i-- {
		if k := fmt.Sprint("k", i); h.has(k) {
			old = k
		}
	}
	h.forget(old)
	if h.has(old) {
		t.Errorf("%s hinted after forget", old)
	}
}

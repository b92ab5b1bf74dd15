package queue_test

import (
	"reflect"
	"testing"

	"github.com/approvals/approvals/queue"
)

// maxServiceMethods caps the Service's exported methods. The Service holds
// the rules of the product and nothing else (issue 39): long-polls live in
// longpoll, and an accessor a face needs belongs beside the face or in a
// package function. A new operation that pushes past the cap should make
// room by moving something out, not by raising it.
const maxServiceMethods = 16

func TestServiceMethodsAtMost16(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[*queue.Service]()
	names := make([]string, typ.NumMethod()) // exported methods only, sorted
	for i := range names {
		names[i] = typ.Method(i).Name
	}
	if len(names) > maxServiceMethods {
		t.Fatalf("queue.Service has %d exported methods, at most %d allowed: %v", len(names), maxServiceMethods, names)
	}
}

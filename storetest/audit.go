package storetest

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/approvals/approvals/audit"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/queue"
)

// sealParams is a sealer round of holder with a lease longer than any test.
func sealParams(holder string) audit.SealParams {
	return audit.SealParams{Holder: holder, Lease: time.Minute, Limit: 1000}
}

// sealWait bounds how long a test waits for events to become sealable: on
// PostgreSQL a transaction of any other test still running holds back
// the horizon (every transaction older than the event's must end).
const sealWait = 30 * time.Second

// sealAll runs holder's rounds until nothing is left to seal.
func sealAll(t *testing.T, s Store, holder string) {
	t.Helper()
	deadline := time.Now().Add(sealWait)
	for {
		_, err := audit.Seal(t.Context(), s, sealParams(holder))
		noErr(t, err, "seal")
		n, err := s.AuditUnsealedCount(t.Context())
		noErr(t, err, "count unsealed")
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events are left unsealed after %s", n, sealWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitSealable returns once n events after the head may be sealed.
func awaitSealable(t *testing.T, s Store, n int) audit.SealableList {
	t.Helper()
	deadline := time.Now().Add(sealWait)
	for {
		head, err := s.AuditHeadGet(t.Context())
		noErr(t, err, "head")
		list, err := s.AuditSealableList(t.Context(), audit.SealableListParams{After: head.Cursor, Limit: n + 10})
		noErr(t, err, "sealable")
		if len(list.Events) >= n {
			return list
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events sealable after %s, want %d", len(list.Events), sealWait, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// allEvents lists every stored event, oldest first.
func allEvents(t *testing.T, s Store) []queue.Event {
	t.Helper()
	var out []queue.Event
	var before int64
	for {
		page, err := s.EventList(t.Context(), queue.EventListParams{BeforeID: before, Limit: 500})
		noErr(t, err, "list events")
		out = append(out, page...)
		if len(page) < 500 {
			break
		}
		before = page[len(page)-1].ID
	}
	slices.Reverse(out)
	return out
}

// chainLinks lists the whole chain in seq order.
func chainLinks(t *testing.T, s Store) []audit.SealedEvent {
	t.Helper()
	var out []audit.SealedEvent
	for {
		page, err := s.AuditChainList(t.Context(), audit.ChainListParams{AfterSeq: int64(len(out)), Limit: 500})
		noErr(t, err, "list the chain")
		out = append(out, page...)
		if len(page) < 500 {
			return out
		}
	}
}

// checkChain fails unless the chain holds every stored event exactly once,
// with seqs 1..n and each link following the one before it, the head at
// its end, and the store's verification finding nothing.
func checkChain(t *testing.T, s Store) []audit.SealedEvent {
	t.Helper()
	links := chainLinks(t, s)
	var prev audit.Hash
	seen := map[int64]int64{}
	for i, l := range links {
		if l.Seq != int64(i+1) {
			t.Fatalf("link %d has seq %d: the chain has a gap or a repeat", i+1, l.Seq)
		}
		if l.PrevHash != prev {
			t.Fatalf("seq %d: prev_hash %s, want the hash of seq %d, %s (a fork)", l.Seq, l.PrevHash, l.Seq-1, prev)
		}
		if l.Event == nil {
			t.Fatalf("seq %d: its event %d is missing", l.Seq, l.EventID)
		}
		if got := audit.Next(prev, *l.Event); got != l.Hash {
			t.Fatalf("seq %d: hash %s, but the event hashes to %s", l.Seq, l.Hash, got)
		}
		if s, dup := seen[l.EventID]; dup {
			t.Fatalf("event %d is sealed at seq %d and again at seq %d", l.EventID, s, l.Seq)
		}
		seen[l.EventID] = l.Seq
		prev = l.Hash
	}
	for _, ev := range allEvents(t, s) {
		if _, ok := seen[ev.ID]; !ok {
			t.Fatalf("event %d (%s) is not in the chain", ev.ID, ev.Kind)
		}
	}
	eq(t, len(seen), len(allEvents(t, s)), "sealed events against stored events")
	head, err := s.AuditHeadGet(t.Context())
	noErr(t, err, "head")
	eq(t, head.Seq, int64(len(links)), "head seq")
	eq(t, head.Hash, prev, "head hash")
	rep, err := audit.VerifyStore(t.Context(), s)
	noErr(t, err, "verify")
	if rep.Problem != nil {
		t.Fatalf("verification of an untouched chain: %v", rep.Problem)
	}
	return links
}

// staffEvent writes a staff event and fails the test otherwise.
func staffEvent(t *testing.T, s Store, kind, subject string, now time.Time) {
	t.Helper()
	noErr(t, s.StaffEventInsert(t.Context(), queue.Event{Kind: kind, Actor: "user:ann@example.com", Subject: subject,
		Channel: "dashboard", At: now, Data: json.RawMessage(`{"role":"approver"}`), Unrouted: true}), "record "+kind)
}

var auditTests = []test{
	{"AppendRefusesLinksThatDoNotFollow", func(t *testing.T, s Store) {
		h1 := audit.HashAfter(audit.Hash{}, []byte(`{"a":1}`))
		h2 := audit.HashAfter(h1, []byte(`{"a":2}`))
		for name, links := range map[string][]audit.Link{
			"a gap in seq":          {{Seq: 1, EventID: 1, Hash: h1}, {Seq: 3, EventID: 2, PrevHash: h1, Hash: h2}},
			"not after the head":    {{Seq: 2, EventID: 1, Hash: h1}},
			"a prev_hash elsewhere": {{Seq: 1, EventID: 1, Hash: h1}, {Seq: 2, EventID: 2, PrevHash: h2, Hash: h2}},
		} {
			ok, err := s.AuditChainAppend(t.Context(), audit.ChainAppendParams{Holder: "a", Lease: time.Minute, Links: links,
				Cursor: audit.Cursor{ID: 2}})
			if err == nil || ok || !strings.Contains(err.Error(), "does not follow") {
				t.Fatalf("%s: appended %v, err %v; want an error saying the links do not follow", name, ok, err)
			}
		}
		head, err := s.AuditHeadGet(t.Context())
		noErr(t, err, "head")
		eq(t, head.Seq, 0, "seq after refused appends")
		eq(t, head.Holder, "", "holder after refused appends")
		eq(t, len(chainLinks(t, s)), 0, "links after refused appends")
	}},
	{"EmptyChain", func(t *testing.T, s Store) {
		head, err := s.AuditHeadGet(t.Context())
		noErr(t, err, "head")
		eq(t, head.Seq, 0, "seq of an empty chain")
		eq(t, head.Hash, audit.Hash{}, "hash of an empty chain")
		if head.SealedAt != nil || head.Verified != nil || head.Holder != "" {
			t.Fatalf("a new chain's head: %+v", head)
		}
		res, err := audit.Seal(t.Context(), s, sealParams("a"))
		noErr(t, err, "seal")
		eq(t, res.Sealed, 0, "sealed of nothing")
		if !res.Holding {
			t.Fatal("the first sealer did not take the free lease")
		}
		checkChain(t, s)
	}},
	{"SealsEveryEventOnce", func(t *testing.T, s Store) {
		pending := submitNew(t, s, classify.AtMostOnce, "send_customer_email", "audit:1", at(0))
		approve(t, s, pending.ID, at(time.Minute))
		claim := submitNew(t, s, classify.ExactlyOnce, "refund", "audit:2", at(0))
		transition(t, s, completeParams(claim.ID, at(2*time.Minute), `{"refund_id":"r-1","amount":12.50}`))
		submitNew(t, s, classify.AtLeastOnce, "lookup", "", at(0))
		staffEvent(t, s, queue.EventUserAdded, queue.UserSubject("bob@example.com"), at(3*time.Minute))
		staffEvent(t, s, queue.EventTokenCreated, queue.TokenSubject("billing"), at(4*time.Minute))
		n, err := s.AuditUnsealedCount(t.Context())
		noErr(t, err, "count unsealed")
		eq(t, n, int64(len(allEvents(t, s))), "unsealed before the first round")

		sealAll(t, s, "a")
		links := checkChain(t, s)
		eq(t, len(links), 7, "links")
		// An action's events are written one after the other, so their
		// seqs follow their order.
		for _, id := range []string{pending.ID, claim.ID} {
			var seqs []int64
			for _, l := range links {
				if l.Event.ActionID == id {
					seqs = append(seqs, l.Seq)
				}
			}
			if len(seqs) != 2 || seqs[0] > seqs[1] {
				t.Fatalf("action %s: seqs %v, want two in order", id, seqs)
			}
		}
		head, err := s.AuditHeadGet(t.Context())
		noErr(t, err, "head")
		if head.SealedAt == nil || head.Holder != "a" || head.LeaseLeft <= 0 {
			t.Fatalf("head after sealing: %+v", head)
		}
		n, err = s.AuditUnsealedCount(t.Context())
		noErr(t, err, "count unsealed")
		eq(t, n, 0, "unsealed after sealing")
	}},
	{"SubmissionIsSealed", func(t *testing.T, s Store) {
		a := newAction(classify.AtMostOnce, "send_customer_email", "audit:payload", at(0))
		a.Payload = json.RawMessage(`{"to":"c-1@example.com","amount":12345678901234567890.10,"note":"käse"}`)
		submit(t, s, a)
		sealAll(t, s, "a")
		links := checkChain(t, s)
		sub := links[0].Event.Action
		if sub == nil {
			t.Fatal("the submitted event's link carries no submission")
		}
		eq(t, sub.Tool, "send_customer_email", "tool")
		eq(t, sub.IntentKey, "audit:payload", "intent key")
		eq(t, sub.Class, string(classify.AtMostOnce), "class")
		eq(t, sub.Attempt, 1, "attempt")
		eq(t, sub.RequestedBy, agent, "requested by")
		canon := string(audit.EventJSON(*links[0].Event))
		if !strings.Contains(canon, `"payload":{"amount":12345678901234567890.10,"note":"käse","to":"c-1@example.com"}`) {
			t.Fatalf("the sealed form does not carry the payload digit for digit: %s", canon)
		}
	}},
	{"StaffEvents", func(t *testing.T, s Store) {
		// An event of no action: listed with its subject (or none), by
		// kind like the actions' events, and sealed like them.
		staffEvent(t, s, queue.EventRoleChanged, queue.UserSubject("bob@example.com"), at(0))
		noErr(t, s.StaffEventInsert(t.Context(), queue.Event{ActionID: "ignored", Kind: queue.EventSignInRefused, Actor: queue.ActorAnonymous,
			Channel: "sso", At: at(time.Minute), Data: json.RawMessage(`{"reason":"no_role"}`), Unrouted: true}), "record a refused sign-in")
		evs := allEvents(t, s)
		eq(t, len(evs), 2, "staff events")
		eq(t, evs[0].ActionID, "", "a staff event's action")
		eq(t, evs[0].Subject, "user:bob@example.com", "subject")
		eq(t, evs[0].Kind, queue.EventRoleChanged, "kind")
		eq(t, evs[0].Channel, "dashboard", "channel")
		timeEq(t, evs[0].At, at(0), "at")
		jsonEq(t, evs[0].Data, []byte(`{"role":"approver"}`), "data")
		eq(t, evs[1].ActionID, "", "the action of a staff event given one")
		eq(t, evs[1].Subject, "", "no subject")
		byKind, err := s.EventList(t.Context(), queue.EventListParams{Kind: queue.EventRoleChanged, Limit: 10})
		noErr(t, err, "list by kind")
		eq(t, len(byKind), 1, "staff events by kind")
		sealAll(t, s, "a")
		links := checkChain(t, s)
		eq(t, links[0].Event.Subject, "user:bob@example.com", "sealed subject")
		eq(t, links[1].Event.Subject, "", "sealed empty subject")
		eq(t, links[1].Event.ActionID, "", "sealed empty action")
	}},
	{"SealsInRounds", func(t *testing.T, s Store) {
		for i := range 5 {
			submitNew(t, s, classify.AtMostOnce, "send_customer_email", fmt.Sprintf("audit:r%d", i), at(0))
		}
		awaitSealable(t, s, 5)
		p := sealParams("a")
		p.Limit = 2
		res, err := audit.Seal(t.Context(), s, p)
		noErr(t, err, "seal")
		eq(t, res.Sealed, 2, "sealed by a round of at most 2")
		for range 3 {
			_, err := audit.Seal(t.Context(), s, p)
			noErr(t, err, "seal")
		}
		checkChain(t, s)
		submitNew(t, s, classify.AtMostOnce, "send_customer_email", "audit:later", at(time.Hour))
		sealAll(t, s, "a")
		eq(t, len(checkChain(t, s)), 6, "links after a later event")
	}},
	{"LeaseHasOneHolder", func(t *testing.T, s Store) {
		submitNew(t, s, classify.AtMostOnce, "send_customer_email", "audit:l1", at(0))
		awaitSealable(t, s, 1)
		short := audit.SealParams{Holder: "a", Lease: 2 * time.Second, Limit: 1000}
		res, err := audit.Seal(t.Context(), s, short)
		noErr(t, err, "seal by a")
		eq(t, res.Sealed, 1, "sealed by a")
		submitNew(t, s, classify.AtMostOnce, "send_customer_email", "audit:l2", at(0))
		awaitSealable(t, s, 1)
		res, err = audit.Seal(t.Context(), s, audit.SealParams{Holder: "b", Lease: 2 * time.Second, Limit: 1000})
		noErr(t, err, "seal by b")
		if res.Sealed != 0 || res.Holding {
			t.Fatalf("b sealed while a held the lease: %+v", res)
		}
		// a dies: b takes over once the lease has run out.
		deadline := time.Now().Add(10 * time.Second)
		for {
			res, err = audit.Seal(t.Context(), s, audit.SealParams{Holder: "b", Lease: 2 * time.Second, Limit: 1000})
			noErr(t, err, "seal by b")
			if res.Holding {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("b did not take the lease over within 10s of a 2s lease")
			}
			time.Sleep(100 * time.Millisecond)
		}
		eq(t, res.Sealed, 1, "sealed by b after the takeover")
		res, err = audit.Seal(t.Context(), s, short)
		noErr(t, err, "seal by a")
		if res.Holding {
			t.Fatal("a still seals after b took the lease")
		}
		// b gives the lease up: a takes it at once.
		noErr(t, audit.ReleaseLease(t.Context(), s, "b"), "release")
		submitNew(t, s, classify.AtMostOnce, "send_customer_email", "audit:l3", at(0))
		awaitSealable(t, s, 1)
		res, err = audit.Seal(t.Context(), s, short)
		noErr(t, err, "seal by a")
		if !res.Holding || res.Sealed != 1 {
			t.Fatalf("a after b's release: %+v", res)
		}
		checkChain(t, s)
	}},
	{"AppendsNeverFork", func(t *testing.T, s Store) {
		// Sealers that read one head race to extend it: one wins, the
		// others append nothing.
		for i := range 3 {
			submitNew(t, s, classify.AtMostOnce, "send_customer_email", fmt.Sprintf("audit:f%d", i), at(0))
		}
		awaitSealable(t, s, 3)
		head, err := s.AuditHeadGet(t.Context())
		noErr(t, err, "head")
		// Each racer seals a different prefix, as sealers that read at
		// different moments would, with that prefix's cursor.
		var prefixes []audit.SealableList
		for n := 1; n <= 3; n++ {
			list, err := s.AuditSealableList(t.Context(), audit.SealableListParams{After: head.Cursor, Limit: n})
			noErr(t, err, "sealable")
			eq(t, len(list.Events), n, "sealable events")
			prefixes = append(prefixes, list)
		}
		var won atomic.Int64
		race(8, func(i int) {
			list := prefixes[i%3]
			links := make([]audit.Link, len(list.Events))
			prev := head.Hash
			for j, ev := range list.Events {
				h := audit.Next(prev, ev)
				links[j] = audit.Link{Seq: int64(j + 1), EventID: ev.ID, PrevHash: prev, Hash: h}
				prev = h
			}
			ok, err := s.AuditChainAppend(t.Context(), audit.ChainAppendParams{Holder: "a", Lease: time.Minute, Seq: head.Seq,
				Links: links, Cursor: list.Cursor})
			if err != nil {
				t.Errorf("append: %v", err)
			}
			if ok {
				won.Add(1)
			}
		})
		eq(t, won.Load(), 1, "appends that extended one head")
		sealAll(t, s, "a")
		eq(t, len(checkChain(t, s)), 3, "links")
	}},
	{"ConcurrentWritersAndSealers", func(t *testing.T, s Store) {
		// Writers commit while two sealers run rounds: the chain ends up
		// holding every event once, in one line.
		stop := make(chan struct{})
		var sealers sync.WaitGroup
		var sealedBy [2]atomic.Int64
		for i := range 2 {
			sealers.Go(func() {
				p := sealParams(fmt.Sprintf("sealer-%d", i))
				p.Limit = 7
				for {
					res, err := audit.Seal(t.Context(), s, p)
					if err != nil {
						t.Errorf("seal: %v", err)
						return
					}
					sealedBy[i].Add(int64(res.Sealed))
					select {
					case <-stop:
						return
					default:
					}
				}
			})
		}
		race(8, func(i int) {
			for j := range 12 {
				a := newAction(classify.AtMostOnce, "send_customer_email", fmt.Sprintf("audit:c%d-%d", i, j), at(0))
				if _, err := s.ActionSubmit(t.Context(), queue.ActionSubmitParams{Action: a, Event: submittedEvent(a)}); err != nil {
					t.Errorf("submit: %v", err)
					return
				}
				if j%3 == 0 {
					if _, err := s.ActionTransition(t.Context(), approveParams(a.ID, "user:ann@example.com", at(time.Minute))); err != nil {
						t.Errorf("approve: %v", err)
						return
					}
				}
				if j%4 == 0 {
					if err := s.StaffEventInsert(t.Context(), queue.Event{Kind: queue.EventSignedIn, Actor: "user:u@example.com",
						Subject: fmt.Sprintf("user:u%d@example.com", i), At: at(time.Minute), Unrouted: true}); err != nil {
						t.Errorf("record: %v", err)
						return
					}
				}
			}
		})
		close(stop)
		sealers.Wait()
		if sealedBy[0].Load() > 0 && sealedBy[1].Load() > 0 {
			t.Fatalf("both sealers sealed (%d and %d events) while the first held its lease", sealedBy[0].Load(), sealedBy[1].Load())
		}
		holder := "sealer-0"
		if sealedBy[1].Load() > 0 {
			holder = "sealer-1"
		}
		sealAll(t, s, holder)
		eq(t, len(checkChain(t, s)), 8*12+8*4+8*3, "links")
	}},
	{"VerifyWhileSealing", func(t *testing.T, s Store) {
		// The sealer of a running server goes on while the chain is
		// verified: links it appends after the verification read the head
		// are no links past the head. The sealer stops after a fixed number
		// of events: each verification reads the whole chain, so a sealer
		// that never stops grows the chain faster than it is read.
		const sealed = 150
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range sealed {
				staffEvent(t, s, queue.EventTokenRevoked, queue.TokenSubject(fmt.Sprintf("t%d", i)), at(time.Minute))
				if _, err := audit.Seal(t.Context(), s, sealParams("a")); err != nil {
					t.Errorf("seal: %v", err)
					return
				}
			}
		}()
		defer func() { <-done }()
		verify := func(when string) audit.StoreReport {
			t.Helper()
			rep, err := audit.VerifyStore(t.Context(), s)
			noErr(t, err, "verify")
			if rep.Problem != nil {
				t.Fatalf("verification %s: %v (head at seq %d)", when, rep.Problem, rep.Head.Seq)
			}
			return rep
		}
		for verified, running := 1, true; running; verified++ {
			select {
			case <-done:
				running = false
			default:
			}
			verify(fmt.Sprintf("%d while the sealer runs", verified))
		}
		// PostgreSQL seals only events below its snapshot's horizon, which a
		// verification reading at the same time holds back: the sealer's
		// last rounds may leave events for the next.
		sealAll(t, s, "a")
		eq(t, verify("after the sealer stopped").Head.Seq, int64(sealed), "head after the sealer stopped")
	}},
	{"ExportAndVerify", func(t *testing.T, s Store) {
		for i := range 4 {
			a := submitNew(t, s, classify.AtMostOnce, "send_customer_email", fmt.Sprintf("audit:e%d", i), at(0))
			approve(t, s, a.ID, at(time.Minute))
		}
		sealAll(t, s, "a")
		pub, key, err := ed25519.GenerateKey(nil)
		noErr(t, err, "key")
		var full bytes.Buffer
		rep, err := audit.Export(t.Context(), s, &full, audit.ExportParams{Key: key, Now: at(time.Hour)})
		noErr(t, err, "export")
		eq(t, rep.Events, 8, "exported events")
		eq(t, bytes.Count(full.Bytes(), []byte("\n")), 9, "lines: the events and the checkpoint")
		frep, err := audit.VerifyFile(bytes.NewReader(full.Bytes()), pub, nil)
		noErr(t, err, "verify the export")
		if frep.Problem != nil {
			t.Fatalf("verify an untouched export: %v", frep.Problem)
		}
		eq(t, frep.Last.Seq, 8, "verified up to")

		staffEvent(t, s, queue.EventTokenRevoked, queue.TokenSubject("old"), at(2*time.Hour))
		sealAll(t, s, "a")
		var more bytes.Buffer
		_, err = audit.Export(t.Context(), s, &more, audit.ExportParams{Since: 8, Key: key, Now: at(3 * time.Hour)})
		noErr(t, err, "export since 8")
		eq(t, bytes.Count(more.Bytes(), []byte("\n")), 2, "lines of the export since 8")
		frep, err = audit.VerifyFile(bytes.NewReader(more.Bytes()), pub, &rep.Checkpoint)
		noErr(t, err, "verify the continuation")
		if frep.Problem != nil || !frep.Continued {
			t.Fatalf("verify the continuation after the first export: %+v", frep)
		}
		if _, err := audit.Export(t.Context(), s, &more, audit.ExportParams{Since: 10, Key: key, Now: at(3 * time.Hour)}); err == nil {
			t.Fatal("an export since a seq past the head was written")
		}
	}},
	{"VerificationIsRecorded", func(t *testing.T, s Store) {
		v := audit.Verification{At: at(time.Hour), Seq: 41, OK: false, Detail: "seq 42: changed: …"}
		noErr(t, s.AuditVerificationSave(t.Context(), v), "save")
		head, err := s.AuditHeadGet(t.Context())
		noErr(t, err, "head")
		if head.Verified == nil {
			t.Fatal("no verification after saving one")
		}
		timeEq(t, head.Verified.At, v.At, "verified at")
		eq(t, head.Verified.Seq, v.Seq, "verified seq")
		eq(t, head.Verified.OK, false, "verified ok")
		eq(t, head.Verified.Detail, v.Detail, "verified detail")
	}},
}

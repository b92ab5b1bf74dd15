package audit

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// testChain seals n events into entries, as the database would hold them.
func testChain(n int) []Entry {
	var out []Entry
	var prev Hash
	for i := 1; i <= n; i++ {
		ev := Event{ID: int64(100 + i), ActionID: fmt.Sprintf("01890a5d-ac96-774b-bcce-%012d", i), Kind: "approved",
			Actor: "user:ann@example.com", Channel: "dashboard", At: time.Date(2031, 3, 14, 9, 0, i, 0, time.UTC),
			Data: []byte(fmt.Sprintf(`{"note":"n%d"}`, i))}
		e := Entry{Seq: int64(i), PrevHash: prev, Event: EventJSON(ev), EventID: ev.ID}
		e.Hash = HashAfter(prev, e.Event)
		prev = e.Hash
		out = append(out, e)
	}
	return out
}

func entriesOf(list []Entry) func(func(Entry, error) bool) {
	return func(yield func(Entry, error) bool) {
		for _, e := range list {
			if !yield(e, nil) {
				return
			}
		}
	}
}

func renumber(list []Entry) []Entry {
	for i := range list {
		list[i].Seq = int64(i + 1)
	}
	return list
}

func TestVerifyNamesTheFirstBadSeq(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		tamper func(c []Entry) []Entry
		seq    int64
		kind   string
	}{
		{"an event's content changed", func(c []Entry) []Entry {
			c[4].Event = bytes.Replace(c[4].Event, []byte("ann@"), []byte("eve@"), 1)
			return c
		}, 5, Changed},
		{"a stored hash changed", func(c []Entry) []Entry { c[4].Hash[0] ^= 1; return c }, 5, Changed},
		{"a seq changed", func(c []Entry) []Entry { c[4].Seq = 7; return c }, 5, Changed},
		{"an event row gone", func(c []Entry) []Entry { c[4].Gone, c[4].Event = true, nil; return c }, 5, Removed},
		{"a link removed", func(c []Entry) []Entry { return slices.Delete(c, 4, 5) }, 5, Removed},
		{"a link removed and the seqs closed up", func(c []Entry) []Entry { return renumber(slices.Delete(c, 4, 5)) }, 5, Removed},
		{"a forged link inserted and the seqs moved up", func(c []Entry) []Entry {
			forged := Entry{PrevHash: c[3].Hash, Event: []byte(`{"kind":"approved","actor":"user:eve@example.com"}`), EventID: 999}
			forged.Hash = HashAfter(forged.PrevHash, forged.Event)
			return renumber(slices.Insert(c, 4, forged))
		}, 5, Inserted},
		{"a link copied after itself", func(c []Entry) []Entry { return slices.Insert(c, 5, c[4]) }, 6, Inserted},
		{"an earlier link copied further on", func(c []Entry) []Entry { return slices.Insert(c, 5, c[3]) }, 6, Inserted},
		{"two links far apart swapped", func(c []Entry) []Entry { c[3], c[8] = c[8], c[3]; return renumber(c) }, 4, Reordered},
		{"two links swapped", func(c []Entry) []Entry { c[4], c[5] = c[5], c[4]; return renumber(c) }, 5, Reordered},
		{"two events swapped under their links", func(c []Entry) []Entry {
			c[4].Event, c[5].Event = c[5].Event, c[4].Event
			return c
		}, 5, Reordered},
		{"the first link removed", func(c []Entry) []Entry { return c[1:] }, 1, Removed},
		{"the last link changed", func(c []Entry) []Entry { c[19].Event = []byte(`{}`); return c }, 20, Changed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.tamper(testChain(20))
			res, err := Verify(entriesOf(c), Anchor{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Problem == nil {
				t.Fatalf("tampering passed verification (checked up to seq %d)", res.Last.Seq)
			}
			if res.Problem.Seq != tc.seq || res.Problem.Kind != tc.kind {
				t.Fatalf("problem %v, want seq %d %s", res.Problem, tc.seq, tc.kind)
			}
		})
	}
	res, err := Verify(entriesOf(testChain(20)), Anchor{})
	if err != nil || res.Problem != nil || res.Last.Seq != 20 {
		t.Fatalf("an untouched chain: %+v, %v", res, err)
	}
	// A chain cut short at its end holds as far as it goes; the head says
	// where it should end.
	c := testChain(20)
	res, _ = Verify(entriesOf(c[:18]), Anchor{})
	if p := checkEnd(res, Head{Seq: 20, Hash: c[19].Hash}); p == nil || p.Seq != 19 || p.Kind != Removed {
		t.Fatalf("a chain missing its last two links: %v", p)
	}
}

// export writes the chain as an export signed with key, since 0.
func export(c []Entry, key ed25519.PrivateKey) []byte {
	var b []byte
	for _, e := range c {
		b = AppendEntryLine(b, Link{Seq: e.Seq, PrevHash: e.PrevHash, Hash: e.Hash}, e.Event)
	}
	last := c[len(c)-1]
	return AppendCheckpointLine(b, SignCheckpoint(key, c[0].Seq-1, last.Seq, last.Hash, time.Date(2031, 3, 15, 0, 0, 0, 0, time.UTC)))
}

// flipAfter changes the hex digit right after marker in line.
func flipAfter(line, marker string) string {
	i := strings.Index(line, marker) + len(marker)
	d := "1"
	if line[i] == '1' {
		d = "2"
	}
	return line[:i] + d + line[i+1:]
}

func lines(b []byte) []string { return strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n") }

func TestVerifyFileNamesTheFirstBadSeq(t *testing.T) {
	t.Parallel()
	pub, key, _ := ed25519.GenerateKey(nil)
	otherPub, _, _ := ed25519.GenerateKey(nil)
	good := export(testChain(10), key)
	for _, tc := range []struct {
		name   string
		tamper func(l []string) []string
		pub    ed25519.PublicKey
		seq    int64
		kind   string
	}{
		{"a byte of an event", func(l []string) []string { l[4] = strings.Replace(l[4], "n5", "n6", 1); return l }, pub, 5, Changed},
		{"a byte of a hash", func(l []string) []string { l[4] = flipAfter(l[4], `"hash":"`); return l }, pub, 5, Changed},
		{"a byte of a prev_hash", func(l []string) []string { l[4] = flipAfter(l[4], `"prev_hash":"`); return l }, pub, 5, Changed},
		{"a line that is no JSON", func(l []string) []string { l[4] = l[4][:20] + "\n"; return l }, pub, 5, Changed},
		{"an extra member", func(l []string) []string { l[4] = strings.Replace(l[4], `{"seq"`, `{"note":"x","seq"`, 1); return l }, pub, 5, Changed},
		{"a member twice", func(l []string) []string { l[4] = strings.Replace(l[4], `{"seq":5,`, `{"seq":5,"seq":5,`, 1); return l }, pub, 5, Changed},
		{"a line removed", func(l []string) []string { return slices.Delete(l, 4, 5) }, pub, 5, Removed},
		{"the first line removed", func(l []string) []string { return l[1:] }, pub, 1, Removed},
		{"a line copied", func(l []string) []string { return slices.Insert(l, 5, l[4]) }, pub, 6, Inserted},
		{"two lines swapped", func(l []string) []string { l[4], l[5] = l[5], l[4]; return l }, pub, 5, Reordered},
		{"the checkpoint removed", func(l []string) []string { return l[:10] }, pub, 11, Removed},
		{"a line after the checkpoint", func(l []string) []string { return append(l, l[9]) }, pub, 11, Changed},
		{"the last event removed", func(l []string) []string { return slices.Delete(l, 9, 10) }, pub, 10, Removed},
		{"another key", func(l []string) []string { return l }, otherPub, 10, Changed},
		{"hashes computed again after an edit", func(l []string) []string {
			c := testChain(10)
			c[4].Event = bytes.Replace(c[4].Event, []byte("n5"), []byte("n6"), 1)
			for i := 4; i < 10; i++ {
				c[i].PrevHash = c[i-1].Hash
				c[i].Hash = HashAfter(c[i].PrevHash, c[i].Event)
			}
			forged := lines(export(c, key))   // signed with a key the forger does not have...
			return append(forged[:10], l[10]) // ...so the original checkpoint stays
		}, pub, 10, Changed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := strings.Join(tc.tamper(lines(good)), "")
			rep, err := VerifyFile(strings.NewReader(in), tc.pub, nil)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Problem == nil {
				t.Fatalf("tampering passed verification:\n%s", in)
			}
			if rep.Problem.Seq != tc.seq || rep.Problem.Kind != tc.kind {
				t.Fatalf("problem %v, want seq %d %s", rep.Problem, tc.seq, tc.kind)
			}
		})
	}
	rep, err := VerifyFile(bytes.NewReader(good), pub, nil)
	if err != nil || rep.Problem != nil || rep.Checkpoint == nil || rep.Last.Seq != 10 {
		t.Fatalf("an untouched export: %+v, %v", rep, err)
	}
	// Whitespace is no content: the hash covers the canonical form.
	spaced := strings.Replace(string(good), `"event":{`, `"event": {  `, -1)
	if rep, err := VerifyFile(strings.NewReader(spaced), pub, nil); err != nil || rep.Problem != nil {
		t.Fatalf("an export with whitespace added: %+v, %v", rep.Problem, err)
	}
}

func TestVerifyFileContinuesAnEarlierExport(t *testing.T) {
	t.Parallel()
	pub, key, _ := ed25519.GenerateKey(nil)
	c := testChain(10)
	first := export(c[:6], key)
	cp, err := ReadCheckpoint(bytes.NewReader(first))
	if err != nil || cp.Seq != 6 || cp.Since != 0 {
		t.Fatalf("checkpoint of the first export: %+v, %v", cp, err)
	}
	second := export(c[6:], key)
	rep, err := VerifyFile(bytes.NewReader(second), pub, cp)
	if err != nil || rep.Problem != nil || !rep.Continued || rep.From.Seq != 6 {
		t.Fatalf("the second export after the first: %+v, %v", rep, err)
	}
	// Alone, it is checked from its own first line.
	rep, err = VerifyFile(bytes.NewReader(second), pub, nil)
	if err != nil || rep.Problem != nil || rep.Continued {
		t.Fatalf("the second export alone: %+v, %v", rep, err)
	}
	// A continuation whose first event was removed: the signed since
	// says where it should start.
	l := lines(second)
	rep, err = VerifyFile(strings.NewReader(strings.Join(l[1:], "")), pub, nil)
	if err != nil || rep.Problem == nil || rep.Problem.Seq != 7 || rep.Problem.Kind != Removed {
		t.Fatalf("the second export without its first line: %+v, %v", rep.Problem, err)
	}
	// An export that does not follow the one it is said to continue.
	other := testChain(7)
	other[6].PrevHash = Hash{9} // it follows some other seq 6
	other[6].Hash = HashAfter(other[6].PrevHash, other[6].Event)
	rep, err = VerifyFile(bytes.NewReader(export(other[6:7], key)), pub, cp)
	if err != nil || rep.Problem == nil || rep.Problem.Seq != 7 {
		t.Fatalf("an export that does not continue the first: %+v, %v", rep.Problem, err)
	}
	// An export of nothing new continues with the same hash.
	empty := AppendCheckpointLine(nil, SignCheckpoint(key, 6, 6, c[5].Hash, time.Now()))
	rep, err = VerifyFile(bytes.NewReader(empty), pub, cp)
	if err != nil || rep.Problem != nil {
		t.Fatalf("an empty continuation: %+v, %v", rep.Problem, err)
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	private, public, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := ParsePrivateKey(private)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(public)
	if err != nil {
		t.Fatal(err)
	}
	cp := SignCheckpoint(key, 0, 3, Hash{7}, time.Now())
	if !cp.Verify(pub) {
		t.Fatal("a checkpoint does not verify with the key's public key")
	}
	for _, change := range []func(c *Checkpoint){
		func(c *Checkpoint) { c.Seq++ }, func(c *Checkpoint) { c.Since++ }, func(c *Checkpoint) { c.Hash[0]++ },
		func(c *Checkpoint) { c.At = c.At.Add(time.Nanosecond) },
	} {
		c := cp
		change(&c)
		if c.Verify(pub) {
			t.Fatalf("a changed checkpoint verifies: %+v", c)
		}
	}
	full := make([]byte, 0, 64)
	full = append(append(full, key.Seed()...), pub...)
	if k, err := ParsePrivateKey(base64.StdEncoding.EncodeToString(full)); err != nil || !k.Equal(key) {
		t.Fatalf("the 64-byte form of the key: %v", err)
	}
	full[40]++
	if _, err := ParsePrivateKey(base64.StdEncoding.EncodeToString(full)); err == nil {
		t.Fatal("a 64-byte key whose public half is not its seed's was read")
	}
	if _, err := ParsePrivateKey(fmt.Sprintf("%x", full)); err == nil {
		t.Fatal("hex read as base64")
	}
	if _, err := ParsePublicKey(private + "AA"); err == nil {
		t.Fatal("a public key of the wrong length was read")
	}
}

func TestVerifyFileNamesAMalformedFirstLineOfAContinuation(t *testing.T) {
	t.Parallel()
	pub, key, _ := ed25519.GenerateKey(nil)
	c := testChain(10)
	for _, tc := range []struct {
		name string
		in   []Entry
		seq  int64
	}{
		{"events after it", c[6:], 7},
		{"the only event", c[9:], 10},
	} {
		l := lines(export(tc.in, key))
		l[0] = l[0][:20] + "\n"
		rep, err := VerifyFile(strings.NewReader(strings.Join(l, "")), pub, nil)
		if err != nil || rep.Problem == nil || rep.Problem.Seq != tc.seq || rep.Problem.Kind != Changed {
			t.Fatalf("%s: an export after seq %d whose first line is no JSON: %+v, %v; want seq %d changed",
				tc.name, tc.in[0].Seq-1, rep.Problem, err, tc.seq)
		}
	}
}

package audit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strconv"
	"time"
)

// An export is JSON Lines: one line per sealed event,
//
//	{"seq":N,"prev_hash":"<hex>","hash":"<hex>","event":<EventJSON>}
//
// then one checkpoint line,
// {"since":S,"seq":N,"hash":"<hex>","at":"…","signature":"<base64>"},
// signed over Checkpoint.SignedBytes. doc.go describes the whole format.

// pageSize is how many links one read of the chain takes.
const pageSize = 1000

// AppendEntryLine appends the export line of a link and its event.
func AppendEntryLine(out []byte, l Link, event []byte) []byte {
	out = append(out, `{"seq":`...)
	out = strconv.AppendInt(out, l.Seq, 10)
	out = append(out, `,"prev_hash":"`...)
	out = append(out, l.PrevHash.String()...)
	out = append(out, `","hash":"`...)
	out = append(out, l.Hash.String()...)
	out = append(out, `","event":`...)
	out = append(out, event...)
	return append(out, "}\n"...)
}

// AppendCheckpointLine appends the export line of a checkpoint.
func AppendCheckpointLine(out []byte, c Checkpoint) []byte {
	out = append(out, `{"since":`...)
	out = strconv.AppendInt(out, c.Since, 10)
	out = append(out, `,"seq":`...)
	out = strconv.AppendInt(out, c.Seq, 10)
	out = append(out, `,"hash":"`...)
	out = append(out, c.Hash.String()...)
	out = append(out, `","at":`...)
	out = appendString(out, FormatTime(c.At))
	out = append(out, `,"signature":"`...)
	out = append(out, base64.StdEncoding.EncodeToString(c.Signature)...)
	return append(out, "\"}\n"...)
}

// storeEntries reads the links after seq after up to seq upTo, page by
// page, as Entries.
func storeEntries(ctx context.Context, st Store, after, upTo int64) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		for after < upTo {
			page, err := st.AuditChainList(ctx, ChainListParams{AfterSeq: after, Limit: int(min(pageSize, upTo-after))})
			if err != nil {
				yield(Entry{}, fmt.Errorf("read the chain after seq %d: %w", after, err))
				return
			}
			if len(page) == 0 {
				return
			}
			for _, s := range page {
				e := Entry{Seq: s.Seq, PrevHash: s.PrevHash, Hash: s.Hash, EventID: s.EventID, Gone: s.Event == nil}
				if s.Event != nil {
					e.Event = EventJSON(*s.Event)
				}
				if !yield(e, nil) {
					return
				}
				after = s.Seq
			}
		}
	}
}

// checkEnd judges how a chain that held up to res.Last ends against the
// head, which says where it should end.
func checkEnd(res Result, head Head) *Problem {
	switch {
	case res.Last.Seq < head.Seq:
		return &Problem{res.Last.Seq + 1, Removed, fmt.Sprintf("the chain stops at seq %d, but its head is at seq %d", res.Last.Seq, head.Seq)}
	case res.Last.Seq > head.Seq:
		return &Problem{head.Seq + 1, Inserted, fmt.Sprintf("the chain goes on past its head at seq %d", head.Seq)}
	case res.Last.Hash != head.Hash:
		return &Problem{head.Seq, Changed, "the hash at the head is not the last link's"}
	}
	return nil
}

// StoreReport is what a verification of the database found.
type StoreReport struct {
	Result
	Head Head
	// Unsealed counts the events waiting for the sealer.
	Unsealed int64
}

// VerifyStore checks the whole chain in the database: every link from seq
// 1 (an older link edited in place keeps its stored hash, so only reading
// every event again finds the edit), that the chain ends at its head, and
// that no event stands before the seal cursor outside the chain.
func VerifyStore(ctx context.Context, st Store) (StoreReport, error) {
	head, err := st.AuditHeadGet(ctx)
	if err != nil {
		return StoreReport{}, fmt.Errorf("read the chain's head: %w", err)
	}
	// Links past the head (one more page) are read too, so that a row
	// appended behind the sealer's back is seen.
	res, err := Verify(storeEntries(ctx, st, 0, head.Seq+pageSize), Anchor{})
	if err != nil {
		return StoreReport{}, err
	}
	// The sealer goes on while the chain is read: links past the head read
	// at the start are judged against the head as it is now, and only
	// links past that one stand outside the chain.
	for res.Problem == nil && res.Last.Seq > head.Seq {
		now, err := st.AuditHeadGet(ctx)
		if err != nil {
			return StoreReport{}, fmt.Errorf("read the chain's head: %w", err)
		}
		if now.Seq < res.Last.Seq {
			break
		}
		head = now
		more, err := Verify(storeEntries(ctx, st, res.Last.Seq, head.Seq+pageSize), res.Last)
		if err != nil {
			return StoreReport{}, err
		}
		res.Last, res.Problem = more.Last, more.Problem
	}
	if res.Problem == nil {
		res.Problem = checkEnd(res, head)
	}
	strays, err := st.AuditStrayList(ctx, 1)
	if err != nil {
		return StoreReport{}, fmt.Errorf("look for events outside the chain: %w", err)
	}
	if len(strays) > 0 {
		s := strays[0]
		seq := s.Before
		if seq == 0 {
			seq = head.Seq
		}
		if res.Problem == nil || seq < res.Problem.Seq {
			res.Problem = &Problem{seq, Inserted, fmt.Sprintf("event id %d (%s by %s) stands before it in seal order but was never sealed",
				s.Event.ID, s.Event.Kind, s.Event.Actor)}
		}
	}
	unsealed, err := st.AuditUnsealedCount(ctx)
	if err != nil {
		return StoreReport{}, fmt.Errorf("count the events waiting for the sealer: %w", err)
	}
	return StoreReport{Result: res, Head: head, Unsealed: unsealed}, nil
}

// ExportParams say what to export and how to sign it.
type ExportParams struct {
	// Since: export the events after this seq (0: all).
	Since int64
	Key   ed25519.PrivateKey
	Now   time.Time
}

// ExportReport is what an export wrote.
type ExportReport struct {
	Checkpoint Checkpoint
	// Events is how many event lines it wrote; Unsealed how many events
	// were still waiting for the sealer (not exported).
	Events, Unsealed int64
}

// Export writes the sealed events after p.Since and a checkpoint of the
// head as it was when the export began, signed with p.Key. It checks each
// link as it goes and never signs a chain that does not hold: a problem is
// returned as the error (a *Problem), after the lines before it were
// written and before any checkpoint.
func Export(ctx context.Context, st Store, w io.Writer, p ExportParams) (ExportReport, error) {
	head, err := st.AuditHeadGet(ctx)
	if err != nil {
		return ExportReport{}, fmt.Errorf("read the chain's head: %w", err)
	}
	if p.Since < 0 || p.Since > head.Seq {
		return ExportReport{}, fmt.Errorf("--since %d: the chain has seq 0 to %d", p.Since, head.Seq)
	}
	from := Anchor{}
	if p.Since > 0 {
		first, err := st.AuditChainList(ctx, ChainListParams{AfterSeq: p.Since - 1, Limit: 1})
		if err != nil {
			return ExportReport{}, fmt.Errorf("read seq %d: %w", p.Since, err)
		}
		if len(first) == 0 || first[0].Seq != p.Since {
			return ExportReport{}, &Problem{p.Since, Removed, "the link to continue from is missing"}
		}
		from = Anchor{Seq: p.Since, Hash: first[0].Hash}
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	var rep ExportReport
	var writeErr error
	var line []byte
	tee := func(yield func(Entry, error) bool) {
		for e, err := range storeEntries(ctx, st, p.Since, head.Seq) {
			if err == nil && writeErr == nil {
				line = AppendEntryLine(line[:0], Link{Seq: e.Seq, PrevHash: e.PrevHash, Hash: e.Hash}, e.Event)
				_, writeErr = bw.Write(line)
			}
			if writeErr != nil {
				yield(Entry{}, writeErr)
				return
			}
			if !yield(e, err) {
				return
			}
		}
	}
	res, err := Verify(tee, from)
	if err != nil {
		return ExportReport{}, err
	}
	if res.Problem == nil {
		res.Problem = checkEnd(res, head)
	}
	if res.Problem != nil {
		_ = bw.Flush()
		return ExportReport{}, res.Problem
	}
	rep.Events = res.Last.Seq - p.Since
	rep.Checkpoint = SignCheckpoint(p.Key, p.Since, head.Seq, head.Hash, p.Now)
	if _, err := bw.Write(AppendCheckpointLine(nil, rep.Checkpoint)); err != nil {
		return ExportReport{}, err
	}
	if err := bw.Flush(); err != nil {
		return ExportReport{}, err
	}
	if rep.Unsealed, err = st.AuditUnsealedCount(ctx); err != nil {
		return ExportReport{}, fmt.Errorf("count the events waiting for the sealer: %w", err)
	}
	return rep, nil
}

// FileReport is what a verification of an export found.
type FileReport struct {
	Result
	// Checkpoint is the export's last line, nil when it has none.
	Checkpoint *Checkpoint
	// Continued: the export's first event was checked against After's
	// checkpoint (VerifyFile); otherwise an export that starts past seq 1
	// was taken at its word for the hash before it.
	Continued bool
}

// VerifyFile checks an export offline: every line's link, that its last
// line is a checkpoint of the chain's end signed by pub, and, with after
// (the checkpoint of the export it continues), that it continues that one.
func VerifyFile(r io.Reader, pub ed25519.PublicKey, after *Checkpoint) (FileReport, error) {
	lr := &lineReader{r: bufio.NewReaderSize(r, 64<<10)}
	first, err := lr.next()
	if err != nil {
		return FileReport{}, err
	}
	var rep FileReport
	var from Anchor
	switch {
	case after != nil:
		from, rep.Continued = Anchor{Seq: after.Seq, Hash: after.Hash}, true
	case first.checkpoint != nil:
		// No events: the export ends where it starts.
		from = Anchor{Seq: first.checkpoint.Since, Hash: first.checkpoint.Hash}
	case first.entry != nil && first.entry.Seq > 1 && first.entry.Malformed == "":
		// Without the export it continues, the hash before its first event
		// is taken from that event's line; its seq is checked against the
		// checkpoint's since.
		from = Anchor{Seq: first.entry.Seq - 1, Hash: first.entry.PrevHash}
	case first.entry != nil && first.entry.Malformed != "":
		// An unreadable first line says nothing of where it stands: the
		// line after it does (the entry after it, or the checkpoint's
		// since), so the problem names the seq it holds, not seq 1.
		second, err := lr.next()
		if err != nil {
			return FileReport{}, err
		}
		switch {
		case second.checkpoint != nil:
			from.Seq = second.checkpoint.Since
		case second.entry != nil && second.entry.Malformed == "" && second.entry.Seq > 1:
			from.Seq = second.entry.Seq - 2
		}
		lr.back = &second
	}
	entries := func(yield func(Entry, error) bool) {
		l := first
		for {
			switch {
			case l.eof:
				return
			case l.checkpoint != nil:
				rep.Checkpoint = l.checkpoint
				next, err := lr.next()
				if err != nil {
					yield(Entry{}, err)
					return
				}
				if next.eof {
					return
				}
				// A line after the checkpoint: the export goes on past the
				// seq it signed.
				rep.Checkpoint = nil
				if !yield(Entry{Seq: l.checkpoint.Seq + 1, Where: fmt.Sprintf("line %d: ", lr.n-1),
					Malformed: "a checkpoint stands before this line; it must be the last"}, nil) {
					return
				}
				l = next
				continue
			}
			if !yield(*l.entry, nil) {
				return
			}
			var err error
			if l, err = lr.next(); err != nil {
				yield(Entry{}, err)
				return
			}
		}
	}
	res, err := Verify(entries, from)
	if err != nil {
		return FileReport{}, err
	}
	rep.Result = res
	if res.Problem != nil {
		return rep, nil
	}
	cp := rep.Checkpoint
	switch {
	case cp == nil:
		res.Problem = &Problem{res.Last.Seq + 1, Removed, "the export has no checkpoint line at its end: it was cut short or its last line was removed"}
	case !cp.Verify(pub):
		res.Problem = &Problem{cp.Seq, Changed, "the checkpoint's signature does not verify with this public key"}
	case cp.Since < res.From.Seq:
		res.Problem = &Problem{cp.Since + 1, Removed, fmt.Sprintf("the checkpoint says the export follows seq %d, but its events start after seq %d", cp.Since, res.From.Seq)}
	case cp.Since > res.From.Seq:
		res.Problem = &Problem{res.From.Seq + 1, Inserted, fmt.Sprintf("the checkpoint says the export follows seq %d, but its events start after seq %d", cp.Since, res.From.Seq)}
	case cp.Seq > res.Last.Seq:
		res.Problem = &Problem{res.Last.Seq + 1, Removed, fmt.Sprintf("the checkpoint signs seq %d, but the events stop at seq %d", cp.Seq, res.Last.Seq)}
	case cp.Seq < res.Last.Seq:
		res.Problem = &Problem{cp.Seq + 1, Inserted, fmt.Sprintf("the events go on past seq %d, which the checkpoint signs", cp.Seq)}
	case cp.Hash != res.Last.Hash:
		res.Problem = &Problem{cp.Seq, Changed, fmt.Sprintf("the chain's hash at seq %d is not the one signed: an event up to seq %d was changed and the hashes after it computed again", cp.Seq, cp.Seq)}
	}
	rep.Result = res
	return rep, nil
}

// ReadCheckpoint returns the checkpoint line that ends an export (the one
// a later export continues); an error when its last line is none.
func ReadCheckpoint(r io.Reader) (*Checkpoint, error) {
	lr := &lineReader{r: bufio.NewReaderSize(r, 64<<10)}
	var last *Checkpoint
	for {
		l, err := lr.next()
		if err != nil {
			return nil, err
		}
		if l.eof {
			if last == nil {
				return nil, errors.New("its last line is not a checkpoint")
			}
			return last, nil
		}
		last = l.checkpoint
	}
}

// exportLine is one line of an export: an entry, a checkpoint, or the end.
type exportLine struct {
	entry      *Entry
	checkpoint *Checkpoint
	eof        bool
}

type lineReader struct {
	r    *bufio.Reader
	n    int         // lines read
	back *exportLine // a line read ahead, next returns it first
}

// next reads one line. A line that is not an entry or a checkpoint is an
// entry with Malformed set; the error is a failure to read.
func (lr *lineReader) next() (exportLine, error) {
	if l := lr.back; l != nil {
		lr.back = nil
		return *l, nil
	}
	b, err := lr.r.ReadBytes('\n')
	if err == io.EOF && len(b) == 0 {
		return exportLine{eof: true}, nil
	}
	if err != nil && err != io.EOF {
		return exportLine{}, err
	}
	lr.n++
	where := fmt.Sprintf("line %d: ", lr.n)
	members, perr := topMembers(bytes.TrimRight(b, "\r\n"))
	if perr != nil {
		return exportLine{entry: &Entry{Where: where, Malformed: perr.Error()}}, nil
	}
	if _, ok := members["signature"]; ok {
		cp, err := parseCheckpoint(members)
		if err != nil {
			return exportLine{entry: &Entry{Where: where, Malformed: "checkpoint: " + err.Error()}}, nil
		}
		return exportLine{checkpoint: cp}, nil
	}
	e, err := parseEntry(members)
	e.Where = where
	if err != nil {
		e.Malformed = err.Error()
	}
	return exportLine{entry: &e}, nil
}

// topMembers reads a line's JSON object into its members, refusing a
// member twice (the second would hide from a reader what the first says).
func topMembers(line []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("the line is not a JSON object")
	}
	members := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, errors.New("the line is not valid JSON")
		}
		key := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, errors.New("the line is not valid JSON")
		}
		if _, dup := members[key]; dup {
			return nil, fmt.Errorf("the line has %q twice", key)
		}
		members[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, errors.New("the line is not valid JSON")
	}
	if dec.More() {
		return nil, errors.New("the line holds more than one JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the line holds more than one JSON value")
	}
	return members, nil
}

func onlyMembers(m map[string]json.RawMessage, names ...string) error {
	if len(m) != len(names) {
		for k := range m {
			known := false
			for _, n := range names {
				known = known || k == n
			}
			if !known {
				return fmt.Errorf("unknown member %q", k)
			}
		}
		return fmt.Errorf("want the members %v", names)
	}
	for _, n := range names {
		if _, ok := m[n]; !ok {
			return fmt.Errorf("no %q member", n)
		}
	}
	return nil
}

func parseSeq(raw json.RawMessage) (int64, error) {
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("seq %s is not a whole number", raw)
	}
	return n, nil
}

func parseHashMember(raw json.RawMessage, name string) (Hash, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return Hash{}, fmt.Errorf("%s is not a string", name)
	}
	h, err := ParseHash(s)
	if err != nil {
		return Hash{}, fmt.Errorf("%s: %w", name, err)
	}
	return h, nil
}

func parseEntry(m map[string]json.RawMessage) (Entry, error) {
	var e Entry
	if err := onlyMembers(m, "seq", "prev_hash", "hash", "event"); err != nil {
		return e, err
	}
	var err error
	if e.Seq, err = parseSeq(m["seq"]); err != nil {
		return e, err
	}
	if e.PrevHash, err = parseHashMember(m["prev_hash"], "prev_hash"); err != nil {
		return e, err
	}
	if e.Hash, err = parseHashMember(m["hash"], "hash"); err != nil {
		return e, err
	}
	raw := m["event"]
	if len(raw) == 0 || raw[0] != '{' {
		return e, errors.New("event is not a JSON object")
	}
	if e.Event, err = Canonical(raw); err != nil {
		return e, fmt.Errorf("event: %w", err)
	}
	var id struct {
		ID int64 `json:"id"`
	}
	_ = json.Unmarshal(raw, &id)
	e.EventID = id.ID
	return e, nil
}

func parseCheckpoint(m map[string]json.RawMessage) (*Checkpoint, error) {
	if err := onlyMembers(m, "since", "seq", "hash", "at", "signature"); err != nil {
		return nil, err
	}
	var c Checkpoint
	var err error
	if c.Since, err = parseSeq(m["since"]); err != nil {
		return nil, err
	}
	if c.Seq, err = parseSeq(m["seq"]); err != nil {
		return nil, err
	}
	if c.Hash, err = parseHashMember(m["hash"], "hash"); err != nil {
		return nil, err
	}
	var at, sig string
	if json.Unmarshal(m["at"], &at) != nil {
		return nil, errors.New("at is not a string")
	}
	if c.At, err = time.Parse(time.RFC3339Nano, at); err != nil {
		return nil, fmt.Errorf("at %q is not an RFC 3339 time", at)
	}
	if FormatTime(c.At) != at {
		return nil, fmt.Errorf("at %q is not written as exports write it (%s)", at, FormatTime(c.At))
	}
	if json.Unmarshal(m["signature"], &sig) != nil {
		return nil, errors.New("signature is not a string")
	}
	if c.Signature, err = base64.StdEncoding.DecodeString(sig); err != nil {
		return nil, errors.New("signature is not base64")
	}
	return &c, nil
}

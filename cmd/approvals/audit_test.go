package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"

	"github.com/approvals/approvals/audit"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/internal/apptest"
	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/sqlite"
)

// auditDB is a database with a sealed chain of ten events (four
// submissions, each approved, and two staff events), the URL the binary
// reaches it by, and a raw connection for a hand that tampers with it.
type auditDB struct {
	env  *apptest.Env
	url  string
	exec func(t *testing.T, query string, args ...any)
	// query reads one number.
	query func(t *testing.T, query string) int64
	// param is the n-th placeholder of the dialect.
	param func(n int) string
	// ids is the dialect's audit_round.event_ids of the ids in list, an
	// SQL expression ("1, 2").
	ids func(list string) string
}

// oneRound stores the chain's links as one round's row, as a sealer that
// found all ten events sealable at once stores them (PostgreSQL's horizon
// may have split them). The chain still holds.
func oneRound(t *testing.T, db *auditDB, kind string) {
	t.Helper()
	merge := `SELECT min(seq) AS seq, array_agg(event_id ORDER BY seq) AS ids, (array_agg(prev_hash ORDER BY seq))[1] AS prev, string_agg(hash, ''::bytea ORDER BY seq) AS hashes FROM audit_chain`
	if kind == "sqlite" {
		merge = `SELECT min(seq), json_group_array(event_id ORDER BY seq), (SELECT prev_hash FROM audit_chain ORDER BY seq LIMIT 1),
			unhex(group_concat(hex(hash), '' ORDER BY seq)) FROM audit_chain`
	}
	db.exec(t, "CREATE TABLE audit_links_merged AS "+merge)
	db.exec(t, "DELETE FROM audit_round")
	db.exec(t, "INSERT INTO audit_round (seq, event_ids, prev_hash, hashes) SELECT * FROM audit_links_merged")
	db.exec(t, "DROP TABLE audit_links_merged")
}

// splitRounds stores the chain's links one round each, as migration 00022
// stores a chain sealed before it: each link's row stands alone, for a
// hand that moves, deletes or inserts single links. The chain still holds.
func splitRounds(t *testing.T, db *auditDB) {
	t.Helper()
	db.exec(t, "CREATE TABLE audit_links_split AS SELECT seq, event_id, prev_hash, hash FROM audit_chain")
	db.exec(t, "DELETE FROM audit_round")
	db.exec(t, "INSERT INTO audit_round (seq, event_ids, prev_hash, hashes) SELECT seq, "+db.ids("event_id")+", prev_hash, hash FROM audit_links_split")
	db.exec(t, "DROP TABLE audit_links_split")
}

func newAuditDB(t *testing.T, kind string) *auditDB {
	t.Helper()
	e := apptest.NewEnv(t, apptest.EnvOptions{SQLite: kind == "sqlite",
		Tools: apptest.ParseTools(t, apptest.DomainTools, classify.Options{})})
	for i := range 4 {
		a := e.Submit("send_customer_email", map[string]any{"customer_id": fmt.Sprintf("c-%d", i), "topic": "welcome"})
		apptest.Approve(t, e.Service, a.ID)
	}
	for _, name := range []string{"billing", "support"} {
		if err := e.Service.Staff().Record(t.Context(), queue.StaffEvent{Kind: queue.EventTokenCreated,
			Actor: "user:ann@example.com", Subject: queue.TokenSubject(name), Channel: "dashboard"}); err != nil {
			t.Fatal(err)
		}
	}
	apptest.SealAll(t, e.Store)
	db := &auditDB{env: e}
	if kind == "sqlite" {
		db.url = "sqlite:" + e.SQLitePath
		raw, err := sql.Open("sqlite", e.SQLitePath+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { raw.Close() })
		db.exec = func(t *testing.T, q string, args ...any) {
			t.Helper()
			if _, err := raw.Exec(q, args...); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		db.query = func(t *testing.T, q string) (n int64) {
			t.Helper()
			if err := raw.QueryRow(q).Scan(&n); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			return n
		}
		db.param = func(int) string { return "?" }
		db.ids = func(list string) string { return "json_array(" + list + ")" }
		return db
	}
	db.url = e.DatabaseURL
	conn, err := pgx.Connect(t.Context(), e.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	db.exec = func(t *testing.T, q string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(t.Context(), q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.query = func(t *testing.T, q string) (n int64) {
		t.Helper()
		if err := conn.QueryRow(t.Context(), q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	db.param = func(n int) string { return fmt.Sprintf("$%d", n) }
	db.ids = func(list string) string { return "ARRAY[" + list + "]::bigint[]" }
	return db
}

// eventAt is the query of the id of the event sealed at seq.
func eventAt(seq int) string {
	return fmt.Sprintf("(SELECT event_id FROM audit_chain WHERE seq = %d)", seq)
}

// shiftSeqs moves the links from seq on by delta, through a range no link
// uses (the primary key refuses two links of one seq at any moment). The
// links must stand one a round (splitRounds).
func shiftSeqs(t *testing.T, db *auditDB, from, delta int) {
	t.Helper()
	db.exec(t, fmt.Sprintf("UPDATE audit_round SET seq = seq + 1000000 WHERE seq >= %d", from))
	db.exec(t, fmt.Sprintf("UPDATE audit_round SET seq = seq - 1000000 + (%d) WHERE seq >= 1000000", delta))
	db.exec(t, fmt.Sprintf("UPDATE audit_head SET seq = seq + (%d)", delta))
}

// auditRun runs the binary with env added and returns its exit status,
// stdout and stderr.
func auditRun(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// TestAuditVerifyFindsTampering tampers with the rows of a sealed chain as
// someone with access to the database would, on both stores: `approvals
// audit verify` exits 1 naming the first seq whose event was changed,
// removed, inserted or reordered, and records that on the chain's head.
func TestAuditVerifyFindsTampering(t *testing.T) {
	t.Parallel()
	bin := apptest.BuildBinary(t)
	type tamper struct {
		name string
		do   func(t *testing.T, db *auditDB, kind string)
		// want is the message's start; wantPG, when set, PostgreSQL's.
		want, wantPG string
	}
	cases := []tamper{
		{"an event's actor updated", func(t *testing.T, db *auditDB, _ string) {
			db.exec(t, "UPDATE events SET actor = 'user:mallory@example.com' WHERE id = "+eventAt(4))
		}, "seq 4: changed", ""},
		{"a submitted payload updated", func(t *testing.T, db *auditDB, _ string) {
			db.exec(t, `UPDATE actions SET payload = '{"customer_id":"c-0","topic":"welcome","to":"mallory@example.com"}'
				WHERE id = (SELECT action_id FROM events WHERE id = `+eventAt(1)+`)`)
		}, "seq 1: changed", ""},
		{"an event deleted", func(t *testing.T, db *auditDB, _ string) {
			db.exec(t, "DELETE FROM events WHERE id = "+eventAt(5))
		}, "seq 5: removed", ""},
		{"an event and its link deleted, the seqs closed up", func(t *testing.T, db *auditDB, _ string) {
			db.exec(t, "DELETE FROM events WHERE id = "+eventAt(5))
			splitRounds(t, db)
			db.exec(t, "DELETE FROM audit_round WHERE seq = 5")
			shiftSeqs(t, db, 6, -1)
		}, "seq 5: removed", ""},
		{"the last link deleted", func(t *testing.T, db *auditDB, _ string) {
			splitRounds(t, db)
			db.exec(t, "DELETE FROM audit_round WHERE seq = 10")
		}, "seq 10: removed", ""},
		{"an event inserted before the cursor", func(t *testing.T, db *auditDB, kind string) {
			if kind == "sqlite" {
				// SQLite orders by id: the one free id before the chain.
				db.exec(t, `INSERT INTO events (id, subject, kind, actor, channel, at, fanned_out)
					VALUES (0, 'user:mallory@example.com', 'login', 'user:mallory@example.com', 'dashboard', '2031-01-01T00:00:00.000000000Z', 1)`)
				return
			}
			// PostgreSQL orders by transaction: one that wrote seq 3.
			db.exec(t, `INSERT INTO events (subject, kind, actor, channel, at, fanned_out, txid)
				SELECT 'user:mallory@example.com', 'login', 'user:mallory@example.com', 'dashboard', now(), true, txid
				FROM events WHERE id = `+eventAt(3))
		}, "seq 1: inserted", "seq 4: inserted"},
		{"an event inserted into the chain with its hash", func(t *testing.T, db *auditDB, _ string) {
			db.exec(t, `INSERT INTO events (subject, kind, actor, channel, at, fanned_out)
				VALUES ('user:mallory@example.com', 'role_changed', 'user:ann@example.com', 'dashboard', '2031-01-01T00:00:00.000000000Z', true)`)
			forgeLink(t, db, 3)
		}, "seq 3: inserted", ""},
		{"two links swapped", func(t *testing.T, db *auditDB, _ string) {
			splitRounds(t, db)
			db.exec(t, "UPDATE audit_round SET seq = 1000003 WHERE seq = 3")
			db.exec(t, "UPDATE audit_round SET seq = 3 WHERE seq = 4")
			db.exec(t, "UPDATE audit_round SET seq = 4 WHERE seq = 1000003")
		}, "seq 3: reordered", ""},
		{"two events swapped under their links", func(t *testing.T, db *auditDB, _ string) {
			e3, e4 := db.query(t, "SELECT "+eventAt(3)), db.query(t, "SELECT "+eventAt(4))
			splitRounds(t, db)
			db.exec(t, "UPDATE audit_round SET event_ids = "+db.ids("-1")+" WHERE seq = 3")
			db.exec(t, fmt.Sprintf("UPDATE audit_round SET event_ids = %s WHERE seq = 4", db.ids(fmt.Sprint(e3))))
			db.exec(t, fmt.Sprintf("UPDATE audit_round SET event_ids = %s WHERE seq = 3", db.ids(fmt.Sprint(e4))))
		}, "seq 3: reordered", ""},
		// The same inside one round's row, as it was sealed: the ids at seq
		// 3 and 4 swapped in its array, the hashes left.
		{"two events swapped inside a round", func(t *testing.T, db *auditDB, kind string) {
			oneRound(t, db, kind)
			e3, e4 := db.query(t, "SELECT "+eventAt(3)), db.query(t, "SELECT "+eventAt(4))
			if kind == "sqlite" {
				db.exec(t, fmt.Sprintf("UPDATE audit_round SET event_ids = json_set(event_ids, '$[2]', %d, '$[3]', %d)", e4, e3))
				return
			}
			db.exec(t, fmt.Sprintf("UPDATE audit_round SET event_ids[3] = %d, event_ids[4] = %d", e4, e3))
		}, "seq 3: reordered", ""},
		// A link cut out of a round's row (its id and its hash): the links
		// keep no prev_hash of their own inside a round, so the event now
		// at seq 5 reads as changed there, the first seq that does not hold.
		{"a link cut out of a round", func(t *testing.T, db *auditDB, kind string) {
			oneRound(t, db, kind)
			if kind == "sqlite" {
				db.exec(t, "UPDATE audit_round SET event_ids = json_remove(event_ids, '$[4]'), hashes = unhex(substr(hex(hashes), 1, 256) || substr(hex(hashes), 321))")
			} else {
				db.exec(t, "UPDATE audit_round SET event_ids = event_ids[1:4] || event_ids[6:], hashes = substring(hashes FROM 1 FOR 128) || substring(hashes FROM 161)")
			}
			db.exec(t, "UPDATE audit_head SET seq = seq - 1")
		}, "seq 5: changed", ""},
	}
	for _, kind := range []string{"sqlite", "postgres"} {
		for _, tc := range cases {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				db := newAuditDB(t, kind)
				if code, out, errOut := auditRun(t, bin, nil, "audit", "verify", "--database-url", db.url); code != 0 ||
					!strings.Contains(out, "verified: seq 1 to 10") {
					t.Fatalf("verify before tampering: exit %d\n%s%s", code, out, errOut)
				}
				tc.do(t, db, kind)
				want := tc.want
				if kind == "postgres" && tc.wantPG != "" {
					want = tc.wantPG
				}
				code, out, errOut := auditRun(t, bin, nil, "audit", "verify", "--database-url", db.url)
				if code != 1 || !strings.HasPrefix(errOut, "approvals audit: "+want) {
					t.Fatalf("verify after tampering: exit %d, stderr %q (stdout %q); want 1 and %q", code, errOut, out, want)
				}
				head, err := db.env.Store.AuditHeadGet(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if v := head.Verified; v == nil || v.OK || !strings.HasPrefix(v.Detail, want) {
					t.Fatalf("recorded verification: %+v", v)
				}
			})
		}
	}
}

// forgeLink seals the newest event into the chain at seq as a forger who
// knows the hash would: the links from seq on move up one, the new link
// follows seq-1 with the right hash.
func forgeLink(t *testing.T, db *auditDB, seq int64) {
	t.Helper()
	ctx := t.Context()
	st := db.env.Store
	head, err := st.AuditHeadGet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var list audit.SealableList
	deadline := time.Now().Add(30 * time.Second)
	for len(list.Events) == 0 {
		if list, err = st.AuditSealableList(ctx, audit.SealableListParams{After: head.Cursor, Limit: 1}); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the forged event is not sealable after 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	before, err := st.AuditChainList(ctx, audit.ChainListParams{AfterSeq: seq - 2, Limit: 1})
	if err != nil || len(before) != 1 {
		t.Fatalf("read seq %d: %v", seq-1, err)
	}
	prev := before[0].Hash
	h := audit.Next(prev, list.Events[0])
	splitRounds(t, db)
	shiftSeqs(t, db, int(seq), 1)
	db.exec(t, fmt.Sprintf("INSERT INTO audit_round (seq, event_ids, prev_hash, hashes) VALUES (%s, %s, %s, %s)",
		db.param(1), db.ids(db.param(2)), db.param(3), db.param(4)), seq, list.Events[0].ID, prev[:], h[:])
}

// TestAuditExportAndVerifyOffline runs keygen, export and verify as an
// operator would: the export verifies with the public key (and its
// continuation with --after), and an edited byte, a removed line or two
// swapped lines make verify exit 1 naming the seq.
func TestAuditExportAndVerifyOffline(t *testing.T) {
	t.Parallel()
	bin := apptest.BuildBinary(t)
	code, keys, errOut := auditRun(t, bin, nil, "audit", "keygen")
	if code != 0 {
		t.Fatalf("keygen: exit %d: %s", code, errOut)
	}
	m := regexp.MustCompile(`(?m)^APPROVALS_AUDIT_KEY=(\S+)\nAPPROVALS_AUDIT_PUBLIC_KEY=(\S+)\n$`).FindStringSubmatch(keys)
	if m == nil {
		t.Fatalf("keygen printed %q", keys)
	}
	keyEnv, pub := []string{"APPROVALS_AUDIT_KEY=" + m[1]}, m[2]
	db := newAuditDB(t, "sqlite")
	dir := t.TempDir()
	full := filepath.Join(dir, "full.jsonl")

	if code, _, errOut := auditRun(t, bin, nil, "audit", "export", "--database-url", db.url, "--out", full); code != 1 ||
		!strings.Contains(errOut, "APPROVALS_AUDIT_KEY is not set") {
		t.Fatalf("export without a key: exit %d, %s", code, errOut)
	}
	code, out, errOut := auditRun(t, bin, keyEnv, "audit", "export", "--database-url", db.url, "--out", full)
	if code != 0 || !strings.Contains(out, "exported 10 events (seq 1 to 10)") {
		t.Fatalf("export: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = auditRun(t, bin, nil, "audit", "verify", full, "--public-key", pub)
	if code != 0 || !strings.Contains(out, "verified: seq 1 to 10") {
		t.Fatalf("verify the export: exit %d\n%s%s", code, out, errOut)
	}
	// To stdout, the same lines, signed at another moment.
	code, stdout, _ := auditRun(t, bin, keyEnv, "audit", "export", "--database-url", db.url)
	b, _ := os.ReadFile(full)
	if code != 0 || strings.Join(strings.Split(stdout, "\n")[:10], "\n") != strings.Join(strings.Split(string(b), "\n")[:10], "\n") {
		t.Fatalf("export to stdout: exit %d\n%s", code, stdout)
	}

	// Later events, exported after the first export's checkpoint.
	if err := db.env.Service.Staff().Record(t.Context(), queue.StaffEvent{Kind: queue.EventTokenRevoked,
		Actor: "user:ann@example.com", Subject: queue.TokenSubject("billing")}); err != nil {
		t.Fatal(err)
	}
	apptest.SealAll(t, db.env.Store)
	more := filepath.Join(dir, "more.jsonl")
	if code, out, errOut := auditRun(t, bin, keyEnv, "audit", "export", "--database-url", db.url, "--since", "10", "--out", more); code != 0 ||
		!strings.Contains(out, "exported 1 events (seq 11 to 11)") {
		t.Fatalf("export --since 10: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := auditRun(t, bin, nil, "audit", "verify", more, "--public-key", pub, "--after", full); code != 0 ||
		!strings.Contains(out, "verified: seq 11 to 11") || strings.Contains(out, "pass --after") {
		t.Fatalf("verify --after: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := auditRun(t, bin, nil, "audit", "verify", more, "--public-key", pub); code != 0 || !strings.Contains(out, "pass --after") {
		t.Fatalf("verify a continuation alone: exit %d\n%s", code, out)
	}
	// Nothing new: a checkpoint alone, continuing the last one.
	none := filepath.Join(dir, "none.jsonl")
	if code, out, errOut := auditRun(t, bin, keyEnv, "audit", "export", "--database-url", db.url, "--since", "11", "--out", none); code != 0 ||
		!strings.Contains(out, "no events after seq 11") {
		t.Fatalf("export with nothing new: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := auditRun(t, bin, nil, "audit", "verify", none, "--public-key", pub, "--after", more); code != 0 ||
		!strings.Contains(out, "no events after seq 11") {
		t.Fatalf("verify an export of nothing new: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := auditRun(t, bin, nil, "audit", "verify", none, "--public-key", pub, "--after", full); code != 1 ||
		!strings.Contains(errOut, "seq 11: ") {
		t.Fatalf("an export of nothing after seq 11 verified as continuing seq 10: exit %d, %s", code, errOut)
	}

	lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
	for _, tc := range []struct {
		name   string
		tamper func(l []string) []string
		want   string
	}{
		{"a byte of a payload", func(l []string) []string { l[6] = strings.Replace(l[6], "welcome", "welcomf", 1); return l }, "seq 7: changed"},
		{"a byte of an actor", func(l []string) []string {
			l[7] = strings.Replace(l[7], "ann@example.com", "anm@example.com", 1)
			return l
		}, "seq 8: changed"},
		{"a line removed", func(l []string) []string { return append(l[:2:2], l[3:]...) }, "seq 3: removed"},
		{"two lines swapped", func(l []string) []string { l[3], l[4] = l[4], l[3]; return l }, "seq 4: reordered"},
		{"a line inserted", func(l []string) []string { return append(l[:5:5], append([]string{l[3]}, l[5:]...)...) }, "seq 6: inserted"},
	} {
		f := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".jsonl")
		if err := os.WriteFile(f, []byte(strings.Join(tc.tamper(append([]string(nil), lines...)), "")), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := auditRun(t, bin, nil, "audit", "verify", f, "--public-key", pub)
		if code != 1 || !strings.HasPrefix(errOut, "approvals audit: "+f+": "+tc.want) {
			t.Errorf("%s: exit %d, stderr %q (stdout %q); want 1 naming %q", tc.name, code, errOut, out, tc.want)
		}
	}
	_, otherPub, _ := audit.GenerateKey()
	if code, _, errOut := auditRun(t, bin, nil, "audit", "verify", full, "--public-key", otherPub); code != 1 ||
		!strings.Contains(errOut, "seq 10: changed: the checkpoint's signature does not verify") {
		t.Errorf("verify with another key: exit %d, %s", code, errOut)
	}
	for _, args := range [][]string{
		{"audit", "verify", full},
		{"audit", "verify", "--public-key", pub},
		{"audit", "verify", full, "--public-key", "not base64!"},
		{"audit", "export", "--database-url", db.url, "--since", "12"},
		{"audit", "frobnicate"},
	} {
		if code, _, errOut := auditRun(t, bin, keyEnv, args...); code != 1 || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q; want 1 and why", args, code, errOut)
		}
	}
}

// TestCommandsRecordStaffEvents: user add, user add --update and token
// create and revoke each leave their staff event, by the operating
// system's user on the cli channel.
func TestCommandsRecordStaffEvents(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "approvals.db")
	db := []string{"--database-url", "sqlite:" + path}
	for _, c := range []struct {
		stdin string
		args  []string
	}{
		{"a long passphrase\n", []string{"user", "add", "--email", "Bob@Example.com", "--role", "viewer"}},
		{"another passphrase\n", []string{"user", "add", "--email", "bob@example.com", "--role", "approver", "--update"}},
		{"", []string{"token", "create", "--name", "billing"}},
		{"", []string{"token", "revoke", "--name", "billing"}},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), append(c.args, db...), strings.NewReader(c.stdin), &stdout, &stderr); code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, stderr.String())
		}
	}
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.EventList(t.Context(), queue.EventListParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := len(evs) - 1; i >= 0; i-- {
		ev := evs[i]
		if ev.Channel != "cli" || !strings.HasPrefix(ev.Actor, "cli") || ev.ActionID != "" {
			t.Errorf("event %+v: want a staff event by cli:… on the cli channel", ev)
		}
		got = append(got, ev.Kind+" "+ev.Subject+" "+string(ev.Data))
	}
	want := []string{
		`user_added user:bob@example.com {"role":"viewer"}`,
		`user_updated user:bob@example.com {"password_changed":true,"previous_role":"viewer","role":"approver"}`,
		`token_created token:billing `,
		`token_revoked token:billing `,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("staff events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

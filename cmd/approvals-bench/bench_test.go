package main

import (
	"database/sql"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	t.Parallel()
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 99, 0},
		{"one", []time.Duration{7}, 50, 7},
		{"one p99", []time.Duration{7}, 99, 7},
		{"p50 of 100", lat, 50, 50 * time.Millisecond},
		{"p95 of 100", lat, 95, 95 * time.Millisecond},
		{"p99 of 100", lat, 99, 99 * time.Millisecond},
		{"p100 of 100", lat, 100, 100 * time.Millisecond},
		{"p0 is the minimum", lat, 0, time.Millisecond},
		{"p50 of 4 rounds up", []time.Duration{1, 2, 3, 4}, 50, 2},
		{"p99 of 4 is the max", []time.Duration{1, 2, 3, 4}, 99, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := percentile(tt.in, tt.p); got != tt.want {
				t.Fatalf("percentile(%v, %v) = %v, want %v", tt.in, tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarizeSortsAndLeavesInputAlone(t *testing.T) {
	t.Parallel()
	in := []time.Duration{5, 1, 4, 2, 3}
	s := summarize(in)
	if s.N != 5 || s.P50 != 3 || s.P95 != 5 || s.P99 != 5 || s.Max != 5 {
		t.Fatalf("summarize = %+v", s)
	}
	if in[0] != 5 {
		t.Fatalf("summarize reordered its input: %v", in)
	}
}

func TestParseBenchConfig(t *testing.T) {
	t.Setenv("APPROVALS_TOKEN", "")
	t.Setenv("DATABASE_URL", "")
	tests := []struct {
		name    string
		args    []string
		check   func(t *testing.T, c benchConfig)
		wantErr string
	}{
		{name: "defaults", args: []string{"--token", "T"}, check: func(t *testing.T, c benchConfig) {
			if c.URL != "http://127.0.0.1:8080" || c.Clients != 16 || c.Duration != 10*time.Second ||
				c.Scenario != "new" || c.Tool != "bench_unregistered" || c.ReplayKeys != 1000 {
				t.Fatalf("defaults: %+v", c)
			}
		}},
		{name: "claim defaults to the exactly-once tool", args: []string{"--token", "T", "--scenario", "claim"}, check: func(t *testing.T, c benchConfig) {
			if c.Tool != "bench_exactly_once" {
				t.Fatalf("tool = %q", c.Tool)
			}
		}},
		{name: "explicit flags", args: []string{"--url", "http://localhost:9999/", "--token", "T", "--clients", "4",
			"--duration", "2s", "--scenario", "replay", "--tool", "x", "--replay-keys", "10"}, check: func(t *testing.T, c benchConfig) {
			if c.URL != "http://localhost:9999" || c.Clients != 4 || c.Duration != 2*time.Second || c.Tool != "x" || c.ReplayKeys != 10 {
				t.Fatalf("parsed: %+v", c)
			}
		}},
		{name: "ipv6 loopback", args: []string{"--url", "http://[::1]:8080", "--token", "T"}},
		{name: "127.0.0.2 is loopback", args: []string{"--url", "http://127.0.0.2:8080", "--token", "T"}},
		{name: "sweep needs no token", args: []string{"--scenario", "sweep", "--database-url", "postgres://x/y"}},
		{name: "no token", args: nil, wantErr: "--token"},
		{name: "remote host", args: []string{"--url", "http://10.0.0.1:8080", "--token", "T"}, wantErr: "loopback"},
		{name: "remote name", args: []string{"--url", "http://example.com", "--token", "T"}, wantErr: "loopback"},
		{name: "not http", args: []string{"--url", "ftp://127.0.0.1", "--token", "T"}, wantErr: "http URL"},
		{name: "unknown scenario", args: []string{"--token", "T", "--scenario", "flood"}, wantErr: "--scenario"},
		{name: "too many clients", args: []string{"--token", "T", "--clients", "1000"}, wantErr: "--clients"},
		{name: "no clients", args: []string{"--token", "T", "--clients", "0"}, wantErr: "--clients"},
		{name: "too long", args: []string{"--token", "T", "--duration", "2h"}, wantErr: "--duration"},
		{name: "request cap", args: []string{"--token", "T", "--max-requests", "0"}, wantErr: "--max-requests"},
		{name: "replay keys", args: []string{"--token", "T", "--replay-keys", "0"}, wantErr: "--replay-keys"},
		{name: "path", args: []string{"--token", "T", "--path", "api"}, wantErr: "--path"},
		{name: "sweep without storage", args: []string{"--scenario", "sweep"}, wantErr: "--database-url"},
		{name: "sqlite-insert needs no token", args: []string{"--scenario", "sqlite-insert", "--database-url", "sqlite:y.db"}, check: func(t *testing.T, c benchConfig) {
			if c.Table != "one-index" || c.Clients != 16 {
				t.Fatalf("parsed: %+v", c)
			}
		}},
		{name: "sqlite-insert on the actions table", args: []string{"--scenario", "sqlite-insert", "--database-url", "sqlite:y.db", "--table", "actions"}},
		{name: "sqlite-insert without a file", args: []string{"--scenario", "sqlite-insert"}, wantErr: "sqlite:PATH"},
		{name: "sqlite-insert on PostgreSQL", args: []string{"--scenario", "sqlite-insert", "--database-url", "postgres://x/y"}, wantErr: "sqlite:PATH"},
		{name: "sqlite-insert table", args: []string{"--scenario", "sqlite-insert", "--database-url", "sqlite:y.db", "--table", "events"}, wantErr: "--table"},
		{name: "sqlite-insert clients", args: []string{"--scenario", "sqlite-insert", "--database-url", "sqlite:y.db", "--clients", "0"}, wantErr: "--clients"},
		{name: "stray argument", args: []string{"--token", "T", "extra"}, wantErr: "unexpected argument"},
		{name: "unknown flag", args: []string{"--token", "T", "--flood", "5"}, wantErr: "usage"},
		{name: "deliver defaults", args: []string{"--token", "T", "--scenario", "deliver"}, check: func(t *testing.T, c benchConfig) {
			if c.Tool != "bench_notify" || c.Rate != 50 || c.Receiver != "127.0.0.1:18301" || c.ExecutorTool != "" {
				t.Fatalf("parsed: %+v", c)
			}
		}},
		{name: "deliver rate", args: []string{"--token", "T", "--scenario", "deliver", "--rate", "0"}, wantErr: "--rate"},
		{name: "deliver remote receiver", args: []string{"--token", "T", "--scenario", "deliver", "--receiver", "10.0.0.1:9000"}, wantErr: "--receiver"},
		{name: "deliver receiver with a path", args: []string{"--token", "T", "--scenario", "deliver", "--receiver", "127.0.0.1:9000/x"}, wantErr: "--receiver"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseBenchConfig(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}

// The SQLite yardstick stores every insert it counts, on both tables, and
// refuses a file that exists.
func TestBenchSQLiteInsertStoresWhatItCounts(t *testing.T) {
	t.Parallel()
	for _, table := range []string{"one-index", "actions"} {
		t.Run(table, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "yardstick.db")
			args := []string{"--scenario", "sqlite-insert", "--database-url", "sqlite:" + path,
				"--table", table, "--clients", "4", "--duration", "10s", "--max-requests", "40"}
			var out strings.Builder
			if err := benchCmd(t.Context(), args, &out); err != nil {
				t.Fatalf("bench: %v\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), "summary scenario=sqlite-insert clients=4 ") ||
				!strings.Contains(out.String(), " ops=40 ") || !strings.Contains(out.String(), " errors=0 ") {
				t.Fatalf("report:\n%s", out.String())
			}
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var rows int
			if err := db.QueryRow(`SELECT count(*) FROM actions WHERE state = 'pending'`).Scan(&rows); err != nil || rows != 40 {
				t.Fatalf("%d rows stored (%v), want the 40 counted", rows, err)
			}
			if err := benchCmd(t.Context(), args, &out); err == nil || !strings.Contains(err.Error(), "does not exist yet") {
				t.Fatalf("a second run on the same file: %v", err)
			}
		})
	}
}

// TestFloorServerAnswersEveryScenario: the load generator's new, replay and
// claim scenarios run against the HTTP floor without an error, so the
// floor measures the same requests and answers as approvals serve.
func TestFloorServerAnswersEveryScenario(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(floorHandler())
	t.Cleanup(srv.Close)
	for _, scenario := range []string{"new", "replay", "claim"} {
		t.Run(scenario, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			err := benchCmd(t.Context(), []string{"--url", srv.URL, "--token", "t", "--scenario", scenario,
				"--clients", "2", "--duration", "200ms", "--replay-keys", "10"}, &out)
			if err != nil {
				t.Fatal(err)
			}
			summary := out.String()[strings.Index(out.String(), "summary "):]
			if !strings.Contains(summary, " errors=0 ") || strings.Contains(summary, " ops=0 ") {
				t.Fatalf("the floor does not answer the %s scenario as approvals does:\n%s", scenario, out.String())
			}
		})
	}
}

// TestBenchHelp: -h prints the usage and exits 0.
func TestBenchHelp(t *testing.T) {
	var out, errOut strings.Builder
	if code := run(t.Context(), []string{"-h"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "usage: approvals-bench") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}

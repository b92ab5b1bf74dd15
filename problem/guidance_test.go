package problem_test

import (
	"encoding/json"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/approvals/approvals/problem"
	"github.com/approvals/approvals/queue"
)

var update = flag.Bool("update", false, "rewrite sdk/testdata/refusal-guidance.json")

// guidanceFile is what the SDKs' tests compare their tables with.
var guidanceFile = filepath.Join("..", "sdk", "testdata", "refusal-guidance.json")

func guidanceJSON(t *testing.T) []byte {
	t.Helper()
	out := map[queue.Code]map[string]string{}
	for _, c := range problem.GuidanceCodes() {
		out[c] = map[string]string{
			"rest": problem.Guidance(c, problem.FaceREST),
			"mcp":  problem.Guidance(c, problem.FaceMCP),
			"sdk":  problem.Guidance(c, problem.FaceSDK),
		}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// The SDKs' tests read the guidance from sdk/testdata/refusal-guidance.json:
// it must be this table (go test ./problem -run TestRefusalGuidanceFile -update rewrites it).
func TestRefusalGuidanceFile(t *testing.T) {
	want := guidanceJSON(t)
	if *update {
		if err := os.WriteFile(guidanceFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(guidanceFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s is stale: run go test ./problem -run TestRefusalGuidanceFile -update", guidanceFile)
	}
}

// Every refusal an agent meets says what to do next, naming the face's
// reads; the REST problem carries it as its guidance member.
func TestGuidance(t *testing.T) {
	t.Parallel()
	codes := problem.GuidanceCodes()
	for _, c := range []queue.Code{queue.CodeIntentKeyReused, queue.CodeInProgress, queue.CodeIntentUnderReview, queue.CodeOutcomeConflict, "not_in_plan", "step_not_ready"} {
		if !slices.Contains(codes, c) {
			t.Errorf("%s has no guidance", c)
		}
	}
	if g := problem.Guidance(queue.CodeIntentKeyReused, problem.FaceMCP); !strings.Contains(g, "find_actions with its intent key") || !strings.Contains(g, "do not call again with other arguments") {
		t.Errorf("MCP guidance: %q", g)
	}
	if g := problem.Guidance(queue.CodeInProgress, problem.FaceREST); !strings.Contains(g, "GET /api/v1/actions/{id} with wait") {
		t.Errorf("REST guidance: %q", g)
	}
	if g := problem.Guidance(queue.CodeInvalidPayload, problem.FaceREST); g != "" {
		t.Errorf("invalid_payload has guidance %q", g)
	}

	rec := httptest.NewRecorder()
	if err := problem.Write(rec, &queue.Error{Code: queue.CodeIntentKeyReused, Detail: "held"}); err != nil {
		t.Fatal(err)
	}
	var p problem.Details
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if want := problem.Guidance(queue.CodeIntentKeyReused, problem.FaceREST); p.Guidance != want {
		t.Errorf("REST problem guidance %q, want %q", p.Guidance, want)
	}
	rec = httptest.NewRecorder()
	_ = problem.Write(rec, &queue.Error{Code: queue.CodeInvalidPayload, Detail: "bad"})
	if strings.Contains(rec.Body.String(), "guidance") {
		t.Errorf("a problem without guidance has the member: %s", rec.Body)
	}
}

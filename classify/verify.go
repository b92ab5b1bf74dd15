package classify

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// Defaults and limits of a verifier.
const (
	// DefaultVerifyTimeout bounds one question to the system of record.
	DefaultVerifyTimeout = 10 * time.Second
	// MaxVerifyTimeout keeps a sweep from waiting long on one answer.
	MaxVerifyTimeout = time.Minute
	// VerifyCostLimit bounds one evaluation of one verifier expression: an
	// answer is at most 64 KiB, and a comprehension over it costs about
	// one unit per element and per character compared.
	VerifyCostLimit = 1_000_000
)

// VerifyResolve says what a verifier's proof does.
type VerifyResolve string

const (
	// ResolveSuggest shows the verdict; a person resolves with one click.
	ResolveSuggest VerifyResolve = "suggest"
	// ResolveAuto resolves the ticket by the proof.
	ResolveAuto VerifyResolve = "auto"
)

// Verdict of one check.
const (
	VerdictDone    = "done"
	VerdictNotDone = "not_done"
	VerdictUnknown = "unknown"
)

// Verify says how to ask the system of record whether an action's effect
// happened (docs/verifiers.md): a signed webhook, or a read-only tool of
// an upstream MCP server, and the CEL expressions over its answer that
// prove done or not done. It is data only: the compiled expressions live
// in a cache shared by every copy, so a Tool still round-trips through JSON.
type Verify struct {
	Webhook string `json:"webhook,omitempty"`
	// Upstream and Tool name an upstream MCP server's read-only tool;
	// Arguments are templates over payload fields.
	Upstream  string            `json:"upstream,omitempty"`
	Tool      string            `json:"tool,omitempty"`
	Arguments map[string]string `json:"arguments,omitempty"`
	Timeout   time.Duration     `json:"timeout"`
	Done      string            `json:"done,omitempty"`
	NotDone   string            `json:"not_done,omitempty"`
	Result    string            `json:"result,omitempty"`
	// Settle is how long after the claim's deadline a not_done counts.
	Settle  time.Duration `json:"settle"`
	Resolve VerifyResolve `json:"resolve"`
}

// HasVerifier reports whether approvals can ask the system of record about
// the tool's actions.
func (t *Tool) HasVerifier() bool { return t.Verify != nil }

// VerifyInput is what a verifier's expressions see of one check.
type VerifyInput struct {
	// Response is the answer decoded with numbers as json.Number.
	Response any
	// Payload is the approved payload where there is one, else the submitted.
	Payload map[string]any
	// Action holds id, tool, intent_key, attempt, payload,
	// approved_payload and claimed_at.
	Action map[string]any
	// ClaimedAt is when the action was claimed (zero: never), for settle.
	ClaimedAt time.Time
	Now       time.Time
}

// VerifyOutcome is what a verifier's expressions make of one answer.
type VerifyOutcome struct {
	Verdict string
	Reason  string
	// Result is what a done verdict stores as the action's result.
	Result json.RawMessage
}

// Evaluate runs the verifier's expressions over in. An expression that
// fails, both holding, or neither, is unknown: never a proof. raw is the
// answer as it came, stored as the result when there is no result
// expression.
func (v *Verify) Evaluate(t *Tool, in VerifyInput, raw json.RawMessage) VerifyOutcome {
	vars := map[string]any{"response": topValue(in.Response), "payload": topValue(in.Payload),
		"action": topValue(in.Action), "now": in.Now.UTC()}
	done, err := v.holds(v.Done, vars)
	if err != nil {
		return VerifyOutcome{Verdict: VerdictUnknown, Reason: "the done expression failed: " + err.Error()}
	}
	notDone, err := v.holds(v.NotDone, vars)
	if err != nil {
		return VerifyOutcome{Verdict: VerdictUnknown, Reason: "the not_done expression failed: " + err.Error()}
	}
	switch {
	case done && notDone:
		return VerifyOutcome{Verdict: VerdictUnknown, Reason: "both done and not_done hold: the answer proves nothing"}
	case done:
		out := VerifyOutcome{Verdict: VerdictDone, Reason: "done holds for the answer", Result: raw}
		if v.Result != "" {
			res, err := evalResult(v.Result, vars)
			if err != nil {
				return VerifyOutcome{Verdict: VerdictUnknown, Reason: "done holds, but the result expression failed: " + err.Error()}
			}
			out.Result = res
		}
		return out
	case notDone:
		settled := in.ClaimedAt.Add(t.ClaimTimeout + v.settle(t))
		if in.ClaimedAt.IsZero() || in.Now.Before(settled) {
			return VerifyOutcome{Verdict: VerdictUnknown,
				Reason: fmt.Sprintf("not_done holds, but it counts only from %s (settle)", settled.UTC().Format(time.RFC3339))}
		}
		return VerifyOutcome{Verdict: VerdictNotDone, Reason: "not_done holds for the answer"}
	case v.NotDone == "":
		return VerifyOutcome{Verdict: VerdictUnknown, Reason: "done does not hold, and the verifier has no not_done expression"}
	}
	return VerifyOutcome{Verdict: VerdictUnknown, Reason: "neither done nor not_done holds"}
}

// settle is the settle time in force: claim_timeout unless set.
func (v *Verify) settle(t *Tool) time.Duration {
	if v.Settle > 0 {
		return v.Settle
	}
	return t.ClaimTimeout
}

// holds evaluates one boolean expression; "" never holds.
func (v *Verify) holds(expr string, vars map[string]any) (bool, error) {
	if expr == "" {
		return false, nil
	}
	prog, err := compiledVerify(expr, true)
	if err != nil {
		return false, err
	}
	out, _, err := prog.Eval(vars)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the expression gave %s, not a bool", typeName(out))
	}
	return bool(b), nil
}

// evalResult evaluates the result expression to JSON.
func evalResult(expr string, vars map[string]any) (json.RawMessage, error) {
	prog, err := compiledVerify(expr, false)
	if err != nil {
		return nil, err
	}
	out, _, err := prog.Eval(vars)
	if err != nil {
		return nil, err
	}
	native, err := out.ConvertToNative(reflect.TypeOf(&structpb.Value{}))
	if err != nil {
		return nil, fmt.Errorf("the result is not JSON: %w", err)
	}
	js, err := protojson.Marshal(native.(*structpb.Value))
	if err != nil {
		return nil, fmt.Errorf("the result is not JSON: %w", err)
	}
	return json.RawMessage(js), nil
}

// verifyEnv is the one CEL environment of every verifier expression.
var verifyEnv = sync.OnceValues(func() (*cel.Env, error) {
	return newCELEnv(
		cel.Variable("response", cel.DynType),
		cel.Variable("payload", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("action", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("now", cel.TimestampType),
	)
})

// verifyPrograms caches compiled verifier expressions by text (and kind).
var verifyPrograms sync.Map // string -> cel.Program

// compiledVerify compiles expr once; boolean says it must be a bool.
func compiledVerify(expr string, boolean bool) (cel.Program, error) {
	key := "r:" + expr
	if boolean {
		key = "b:" + expr
	}
	if p, ok := verifyPrograms.Load(key); ok {
		return p.(cel.Program), nil
	}
	env, err := verifyEnv()
	if err != nil {
		return nil, fmt.Errorf("the CEL environment: %w", err)
	}
	ast, iss := env.Compile(expr)
	if iss != nil && len(iss.Errors()) > 0 {
		var msgs []string
		for _, e := range iss.Errors() {
			msgs = append(msgs, fmt.Sprintf("%s: %s", position(expr, e.Location.Line(), e.Location.Column()), e.Message))
		}
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	if boolean && !ast.OutputType().IsExactType(cel.BoolType) && !ast.OutputType().IsExactType(cel.DynType) {
		return nil, fmt.Errorf("the expression is %s, not a bool", ast.OutputType())
	}
	prog, err := env.Program(ast, cel.CostLimit(VerifyCostLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, err
	}
	verifyPrograms.Store(key, prog)
	return prog, nil
}

// CheckVerifierUpstreams checks, once the upstreams are listed, that every
// upstream verifier names a tool its upstream lists as read-only
// (VerifierUpstreamProblem), joining what it finds in tool order.
func (r *Registry) CheckVerifierUpstreams(listings map[string]UpstreamListing) error {
	var errs []error
	for _, name := range r.names {
		if err := r.VerifierUpstreamProblem(name, listings); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// VerifierUpstreamProblem says why tool's upstream verifier must not be
// called with these listings: its upstream lists no such tool, or lists it
// as not read-only (no readOnlyHint, whether or not trust_annotations is
// set: a verifier only reads, and the file does not class it
// at-least-once). Nil for a tool without an upstream verifier, and for an
// upstream not listed (down): its verifier answers unknown until it is
// back, and is checked again then.
func (r *Registry) VerifierUpstreamProblem(tool string, listings map[string]UpstreamListing) error {
	t, ok := r.tools[tool]
	if !ok || t.Verify == nil || t.Verify.Upstream == "" {
		return nil
	}
	v := t.Verify
	l, ok := listings[v.Upstream]
	if !ok || l.Unavailable != "" {
		return nil
	}
	var found *UpstreamTool
	for i := range l.Tools {
		if l.Tools[i].Name == v.Tool {
			found = &l.Tools[i]
		}
	}
	if found == nil {
		return fmt.Errorf("tool %q, field %q: upstream %s lists no tool %s", tool, "verify.tool", v.Upstream, v.Tool)
	}
	readOnly := found.Annotations.ReadOnlyHint != nil && *found.Annotations.ReadOnlyHint
	for _, other := range r.tools {
		if other.Upstream == v.Upstream && other.UpstreamTool == v.Tool && other.Class == AtLeastOnce {
			readOnly = true
		}
	}
	if !readOnly {
		return fmt.Errorf("tool %q, field %q: upstream %s's tool %s is not read-only (no readOnlyHint, and the file does not class it at-least-once); a verifier only reads", tool, "verify.tool", v.Upstream, v.Tool)
	}
	return nil
}

// checkVerifierUpstreamNames checks that every upstream verifier names an
// upstream of the file.
func (r *Registry) checkVerifierUpstreamNames() []error {
	var errs []error
	for _, name := range r.names {
		t := r.tools[name]
		if t.Verify != nil && t.Verify.Upstream != "" {
			if _, ok := r.upstreams[t.Verify.Upstream]; !ok {
				errs = append(errs, fmt.Errorf("tool %q, field %q: no upstream is named %q", name, "verify.upstream", t.Verify.Upstream))
			}
		}
	}
	return errs
}

// RenderTemplate renders an upstream verifier's argument template over
// payload strictly, as an intent key is: a missing field or one that is
// neither a string nor an integral number is an error naming it.
func RenderTemplate(tmpl string, payload map[string]any) (string, error) {
	tm, err := parseTemplate(tmpl)
	if err != nil {
		return "", fmt.Errorf("template %q: %w", tmpl, err)
	}
	var b strings.Builder
	for _, p := range tm {
		if p.path == nil {
			b.WriteString(p.literal)
			continue
		}
		v, reason := lookupField(payload, p.path)
		if reason == "" {
			var s string
			if s, reason = keyValue(v); reason == "" {
				b.WriteString(s)
				continue
			}
		}
		return "", &PayloadError{Field: p.field, Reason: reason}
	}
	return b.String(), nil
}

package classify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
)

// Decision is what a policy rule does with an action it matches.
type Decision string

const (
	// DecideApprove approves the action within its submission.
	DecideApprove Decision = "approve"
	// DecideReject rejects it within its submission, with the rule's note.
	DecideReject Decision = "reject"
	// DecideHuman leaves it to a person, with the rule's required and approvers.
	DecideHuman Decision = "human"
)

// Defaults and limits of policies and grants.
const (
	// PolicyCostLimit bounds one evaluation of one rule, in CEL's cost units (about one per
	// operation, and per character scanned by a string function): far above what a rule over
	// a payload of the largest body costs, far below what would hold a submission up.
	PolicyCostLimit = 1_000_000
	// PolicyTimeLimit bounds one evaluation of one rule in time: cel-go's
	// cost units leave out the work of reading a long string (an
	// equality, size()), so a loop over a long list that reads a long
	// field stays under the cost limit for seconds. Past it the rule
	// fails (closed), as past the cost limit.
	PolicyTimeLimit = time.Second
	// DefaultGrantMax is how long a grant may last on a tool whose grants set no max.
	DefaultGrantMax = 24 * time.Hour
	// MaxRules caps the rules of one tool: each costs every submission of the tool.
	MaxRules = 50
)

// Rule is one rule of a tool's approval policy: when its CEL expression holds for a
// submission, it decides (the first that matches, in the file's order).
type Rule struct {
	Name   string   `json:"name"`
	When   string   `json:"when"`
	Decide Decision `json:"decide"`
	// Note is what a rejection tells the agent (required with reject).
	Note string `json:"note,omitempty"`
	// Required and Approvers (group names), set on a human rule, take the place of the
	// tool's for the actions the rule sends to a person; ApproverEmails are their members.
	Required       int      `json:"required,omitempty"`
	Approvers      []string `json:"approvers,omitempty"`
	ApproverEmails []string `json:"-"`
	// ApproverIdPGroups are the identity provider groups its approver groups name ("idp:").
	ApproverIdPGroups []string `json:"-"`
	// usesAttempt says the expression reads attempt, which the caller must then look up.
	usesAttempt bool
	prog        cel.Program
}

// PolicyInput is what a rule's expression sees of one submission.
type PolicyInput struct {
	// Payload is the submitted payload, decoded with numbers as json.Number.
	Payload   map[string]any
	Tool      string
	Agent     string // the token's name
	IntentKey string
	Attempt   int
	Now       time.Time
}

// Verdict is what a tool's policy says of one submission.
type Verdict struct {
	// Rule is the first rule that matched; nil when none did.
	Rule *Rule
	// Failed is the rule whose evaluation failed, where evaluation
	// stopped: nil when every rule before Rule evaluated. An agent controls
	// the payload, so it controls whether an expression errors; a failed
	// rule therefore never counts as "no match", and nothing after it (a
	// later rule, a grant, an immediate claim) may decide: a person does.
	Failed *Rule
	// Errors holds Failed's error, named by the rule (empty without one).
	Errors []RuleError
}

// HumanRule is the rule a person decides under when evaluation failed: the
// failed rule itself when it is a human rule (its required and approvers
// route the action), else a human rule of its name and expression that
// keeps the tool's routing. Nil when nothing failed.
func (v Verdict) HumanRule() *Rule {
	r := v.Failed
	if r == nil || r.Decide == DecideHuman {
		return r
	}
	return &Rule{Name: r.Name, When: r.When, Decide: DecideHuman}
}

// RuleError is a rule whose expression could not be evaluated for a submission.
type RuleError struct {
	Rule  string `json:"rule"`
	Error string `json:"error"`
}

// HasPolicy reports whether the tool has rules; a tool without them pays nothing for CEL.
func (t *Tool) HasPolicy() bool {
	return t.Approval != nil && len(t.Approval.Policy) > 0 && t.Class != AtLeastOnce
}

// PolicyUsesAttempt reports whether a rule of the tool reads attempt.
func (t *Tool) PolicyUsesAttempt() bool {
	if t.Approval == nil {
		return false
	}
	return slices.ContainsFunc(t.Approval.Policy, func(r Rule) bool { return r.usesAttempt })
}

// Evaluate runs the tool's rules in order over in and returns the first that matches. A rule
// whose evaluation fails (a missing field, a wrong type, a number beyond a double, the cost
// limit) stops the evaluation: it is Failed, and the caller sends the action to a person
// (fail closed). An error never approves, rejects or claims anything.
func (t *Tool) Evaluate(in PolicyInput) Verdict {
	var v Verdict
	if !t.HasPolicy() {
		return v
	}
	vars := map[string]any{
		"payload": payloadValue(in.Payload), "tool": in.Tool, "agent": in.Agent,
		"intent_key": in.IntentKey, "attempt": int64(in.Attempt), "now": in.Now.UTC(),
	}
	for i := range t.Approval.Policy {
		r := &t.Approval.Policy[i]
		ok, err := r.eval(vars)
		if err != nil {
			v.Failed = r
			v.Errors = []RuleError{{Rule: r.Name, Error: err.Error()}}
			return v
		}
		if ok {
			v.Rule = r
			return v
		}
	}
	return v
}

// eval runs the rule's compiled program.
func (r *Rule) eval(vars map[string]any) (bool, error) {
	if r.prog == nil {
		return false, errors.New("the rule was not compiled")
	}
	ctx, cancel := context.WithTimeout(context.Background(), PolicyTimeLimit)
	defer cancel()
	out, _, err := r.prog.ContextEval(ctx, vars)
	if err != nil {
		if ctx.Err() != nil {
			return false, fmt.Errorf("the evaluation took longer than the time limit (%s)", PolicyTimeLimit)
		}
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the expression gave %s, not a bool", typeName(out))
	}
	return bool(b), nil
}

func typeName(v ref.Val) string {
	if v == nil {
		return "nothing"
	}
	return v.Type().TypeName()
}

// topValue converts a variable's decoded JSON value for CEL: an object
// as payloadValue does, anything else as celValue.
func topValue(v any) any {
	if m, ok := v.(map[string]any); ok {
		return payloadValue(m)
	}
	return celValue(v)
}

// payloadValue converts the decoded payload for CEL (celValue). A payload
// holding a number beyond a double becomes a map whose equality is that
// error: cel-go's map equality takes a value's error for "equal", so
// payload == {...} would otherwise match what differs. Reading a field
// that does not hold it stays as it was.
func payloadValue(p map[string]any) any {
	out := make(map[string]any, len(p))
	var bad ref.Val
	for k, e := range p {
		v := celValue(e)
		if isErrVal(v) {
			bad = v.(ref.Val)
		}
		out[k] = v
	}
	if bad == nil {
		return out
	}
	return errEqualMap{Mapper: types.NewStringInterfaceMap(types.DefaultTypeAdapter, out), err: bad}
}

// errEqualMap is a map of the payload whose equality with anything is err.
type errEqualMap struct {
	traits.Mapper
	err ref.Val
}

func (m errEqualMap) Equal(ref.Val) ref.Val { return m.err }

func isErrVal(v any) bool {
	r, ok := v.(ref.Val)
	return ok && types.IsError(r)
}

// celValue converts a decoded JSON value for CEL: json.Number becomes an int when it is a
// whole number that fits, else a double (CEL compares ints and doubles across types). A
// number beyond a double is an error value, and so is a list or object holding one (at any
// depth): cel-go's list and map equality and its "in" take an element's error for "equal"
// or skip it, so [1e309, 2] == [5, 2] would match. Any use of such a list or object fails.
func celValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c := celValue(e)
			if isErrVal(c) {
				return c
			}
			out[k] = c
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c := celValue(e)
			if isErrVal(c) {
				return c
			}
			out[i] = c
		}
		return out
	case json.Number:
		if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return n
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return string(x)
		}
		if math.IsInf(f, 0) {
			// Beyond a double: an error value, so that every expression
			// that reads it fails (and the action goes to a person) rather
			// than seeing some other value. Text would pass double() and
			// string comparisons.
			return types.NewErr("payload number %.40s… does not fit a double", string(x))
		}
		return f
	}
	return v
}

// policyEnv is the one CEL environment of every rule, built on first use.
var policyEnv = sync.OnceValues(newPolicyEnv)

// newPolicyEnv builds the rules' environment, ready to be shared by
// concurrent compilations.
func newPolicyEnv() (*cel.Env, error) {
	return newCELEnv(
		cel.Variable("payload", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("tool", cel.StringType),
		cel.Variable("agent", cel.StringType),
		cel.Variable("intent_key", cel.StringType),
		cel.Variable("attempt", cel.IntType),
		cel.Variable("now", cel.TimestampType),
	)
}

// newCELEnv builds an environment of the tools file's expressions (the
// rules', the verifiers') over vars, with the string extensions and
// numbers compared across types, ready to be shared by concurrent
// compilations.
func newCELEnv(vars ...cel.EnvOption) (*cel.Env, error) {
	env, err := cel.NewEnv(append(vars, ext.Strings(), cel.CrossTypeNumericComparisons(true))...)
	if err != nil {
		return nil, err
	}
	// cel-go (v0.33.2, and still v0.33.4, the newest on the module proxy on
	// 2026-12-05) builds its type checker's symbol catalog lazily, the
	// first time a check reports an undeclared reference, and copies the
	// field unsynchronised whenever a check enters a comprehension's scope:
	// two rules compiled at once (two tools files loading, say) race on it.
	// An undeclared reference checked here, before the environment is
	// shared, builds the catalog once; every later use only reads it.
	_, _ = env.Compile("undeclared_for_the_catalog.field")
	return env, nil
}

// CompilePolicy compiles and type-checks one expression as a rule would be: the error names
// the position within the expression. Exported for tests and the documentation's examples.
func CompilePolicy(expr string) error {
	_, _, err := compileRule(expr)
	return err
}

// compileRule compiles expr once, for every evaluation: it must be boolean.
func compileRule(expr string) (cel.Program, bool, error) {
	env, err := policyEnv()
	if err != nil {
		return nil, false, fmt.Errorf("the CEL environment: %w", err)
	}
	ast, iss := env.Compile(expr)
	if iss != nil && len(iss.Errors()) > 0 {
		var msgs []string
		for _, e := range iss.Errors() {
			msgs = append(msgs, fmt.Sprintf("%s: %s", position(expr, e.Location.Line(), e.Location.Column()), e.Message))
		}
		return nil, false, errors.New(strings.Join(msgs, "; "))
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		hint := ""
		if ast.OutputType().IsExactType(cel.DynType) {
			hint = ` (a payload field is of any type: compare it, as in payload.vip == true)`
		}
		return nil, false, fmt.Errorf("the expression is %s, not a bool%s", ast.OutputType(), hint)
	}
	prog, err := env.Program(ast, cel.CostLimit(PolicyCostLimit), cel.EvalOptions(cel.OptOptimize),
		cel.InterruptCheckFrequency(policyInterruptEvery))
	if err != nil {
		return nil, false, err
	}
	return prog, referencesAttempt(ast), nil
}

// policyInterruptEvery is how many iterations of a comprehension pass
// between two looks at the time limit.
const policyInterruptEvery = 64

// position says where in expr an error is: the column (1-based), and the line when the
// expression has several.
func position(expr string, line, col int) string {
	if strings.Contains(expr, "\n") {
		return fmt.Sprintf("line %d, column %d of the expression", line, col+1)
	}
	return fmt.Sprintf("column %d", col+1)
}

// referencesAttempt reports whether a checked expression reads the variable attempt.
func referencesAttempt(ast *cel.Ast) bool {
	for _, r := range ast.NativeRep().ReferenceMap() {
		if r.Name == "attempt" {
			return true
		}
	}
	return false
}

// LookupField follows a dotted path ("customer.id") through a decoded payload.
func LookupField(payload map[string]any, path string) (any, bool) {
	v, reason := lookupField(payload, strings.Split(path, "."))
	return v, reason == ""
}

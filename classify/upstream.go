package classify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// DefaultUpstreamTimeout bounds one call of an upstream tool unless the upstream sets timeout.
const DefaultUpstreamTimeout = 30 * time.Second

// Upstream is one MCP server of the tools file whose tools approvals calls after the guard.
// Exactly one of URL (Streamable HTTP) and Command (stdio) is set. Headers and Env hold the
// values after ${VAR} expansion, so they may hold secrets: never show them.
type Upstream struct {
	Name string
	// URL is the Streamable HTTP endpoint. It may carry credentials (user:password@host), so
	// it is kept in this one field for whoever shows it to redact.
	URL     string
	Headers map[string]string
	Command []string // program and arguments
	Env     map[string]string
	Timeout time.Duration // one tool call
	// ImportAll imports every tool the upstream lists; otherwise Import names the tools to
	// import (none by default: an upstream tool is reachable only through a tools: entry).
	ImportAll bool
	Import    []string
	Prefix    string // put before an imported tool's name; default "<name>_"
	// TrustAnnotations lets the upstream's annotations classify its tools (as the tools
	// file's do). Without it an annotation is only the upstream's claim, and every imported
	// tool whose tools: entry does not pin class is at-most-once.
	TrustAnnotations bool
}

// Transport is "http" or "stdio".
func (u Upstream) Transport() string {
	if u.URL != "" {
		return "http"
	}
	return "stdio"
}

// Upstreams returns the upstreams of the tools file, sorted by name.
func (r *Registry) Upstreams() []Upstream {
	if r == nil {
		return nil
	}
	out := make([]Upstream, 0, len(r.upstreams))
	for _, name := range slices.Sorted(maps.Keys(r.upstreams)) {
		out = append(out, r.upstreams[name].clone())
	}
	return out
}

func (u Upstream) clone() Upstream {
	u.Headers = maps.Clone(u.Headers)
	u.Env = maps.Clone(u.Env)
	u.Command = slices.Clone(u.Command)
	u.Import = slices.Clone(u.Import)
	return u
}

var upstreamKeys = []string{"command", "env", "headers", "import", "prefix", "timeout", "trust_annotations", "url"}

// parseUpstreams reads the top-level "upstreams:" mapping.
func parseUpstreams(n *yaml.Node, opts Options) (map[string]Upstream, []error) {
	out := map[string]Upstream{}
	if isNull(n) {
		return out, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, []error{fmt.Errorf(`line %d: "upstreams" must be a mapping from upstream name to definition, found %s`, n.Line, nodeKind(n))}
	}
	var errs []error
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolveAlias(n.Content[i+1])
		name := k.Value
		if line, dup := seen[name]; dup {
			errs = append(errs, fmt.Errorf("upstream %q (line %d): defined twice (first at line %d)", name, k.Line, line))
			continue
		}
		seen[name] = k.Line
		if err := checkUpstreamName(name); err != nil {
			errs = append(errs, fmt.Errorf("upstream %q (line %d): %w", name, k.Line, err))
			continue
		}
		u, uerrs := parseUpstream(name, k.Line, v, opts)
		if len(uerrs) > 0 {
			errs = append(errs, uerrs...)
			continue
		}
		out[name] = u
	}
	return out, errs
}

func checkUpstreamName(name string) error {
	if name == "" || len(name) > MaxToolNameLength {
		return fmt.Errorf("an upstream name has 1 to %d characters", MaxToolNameLength)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("an upstream name uses only letters, digits, '_' and '-'; %q is not allowed", c)
		}
	}
	return nil
}

func parseUpstream(name string, line int, def *yaml.Node, opts Options) (Upstream, []error) {
	u := Upstream{Name: name, Timeout: DefaultUpstreamTimeout, Prefix: name + "_"}
	// toolParser's helpers report "tool NAME"; the messages are rewritten to name the
	// upstream, so that the walk over keys, lines and merges is written once.
	p := &toolParser{name: name, line: line, opts: opts}
	if isNull(def) || def.Kind != yaml.MappingNode {
		return u, []error{fmt.Errorf("upstream %q (line %d): the definition must be a mapping of keys (%s), found %s", name, def.Line, strings.Join(upstreamKeys, ", "), nodeKind(def))}
	}
	fields := p.mapping(def, "", upstreamKeys)
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}

	if p.scalar(fields, "url", &u.URL) {
		if parsed, err := url.Parse(u.URL); err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
			// The URL itself is not repeated: it may carry credentials.
			p.fail("url", fields["url"].Line, "not an absolute http or https URL")
		}
	}
	if n := fields["command"]; n != nil && !isNull(n) {
		u.Command = p.stringList(n, "command")
		if len(u.Command) == 0 || u.Command[0] == "" {
			p.fail("command", n.Line, "must be a non-empty list: the program, then its arguments")
		}
	}
	switch {
	case u.URL == "" && len(u.Command) == 0 && len(p.errs) == 0:
		p.errs = append(p.errs, fmt.Errorf("upstream %q (line %d): needs url (Streamable HTTP) or command (stdio)", name, line))
	case u.URL != "" && len(u.Command) > 0:
		p.errs = append(p.errs, fmt.Errorf("upstream %q (line %d): has both url and command; an upstream is reached one way", name, line))
	}
	u.Headers = p.expandedMap(fields, "headers", lookup)
	u.Env = p.expandedMap(fields, "env", lookup)
	if len(u.Headers) > 0 && u.URL == "" {
		p.fail("headers", fields["headers"].Line, "headers are sent only to a url upstream")
	}
	if len(u.Env) > 0 && len(u.Command) == 0 {
		p.fail("env", fields["env"].Line, "env is given only to a command upstream")
	}
	p.duration(fields, "timeout", "timeout", &u.Timeout)
	if n := fields["prefix"]; n != nil && !isNull(n) {
		p.scalar(fields, "prefix", &u.Prefix)
	}
	if n := fields["import"]; n != nil && !isNull(n) {
		if n.Kind == yaml.ScalarNode {
			if n.Value != "all" {
				p.fail("import", n.Line, "%q: write all, or a list of tool names", n.Value)
			}
			u.ImportAll = true
		} else {
			u.Import = p.stringList(n, "import")
			slices.Sort(u.Import)
			if c := slices.Compact(slices.Clone(u.Import)); len(c) != len(u.Import) {
				p.fail("import", n.Line, "names a tool twice")
			}
		}
	}
	if n := fields["trust_annotations"]; n != nil && !isNull(n) {
		if n.Kind != yaml.ScalarNode || (n.Value != "true" && n.Value != "false") {
			p.fail("trust_annotations", n.Line, "must be true or false")
		}
		u.TrustAnnotations = n.Value == "true"
	}
	if u.ImportAll && u.Prefix == "" {
		// Any name the upstream lists would then be imported as it is, so an upstream could
		// take over a tools-file tool (or an approval rule) by listing its name.
		p.fail("prefix", line, `"" with import: all would let the upstream name any tool, a tools-file tool too; set a prefix or list the tools to import`)
	}
	return u, renameErrors(p.errs, name)
}

// renameErrors turns the toolParser's "tool NAME" into "upstream NAME".
func renameErrors(errs []error, name string) []error {
	from, to := "tool "+strconv.Quote(name), "upstream "+strconv.Quote(name)
	out := make([]error, 0, len(errs))
	for _, e := range errs {
		out = append(out, errors.New(strings.Replace(e.Error(), from, to, 1)))
	}
	return out
}

func (p *toolParser) stringList(n *yaml.Node, field string) []string {
	if n.Kind != yaml.SequenceNode {
		p.fail(field, n.Line, "must be a list of strings, found %s", nodeKind(n))
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for _, item := range n.Content {
		item = resolveAlias(item)
		if item.Kind != yaml.ScalarNode || isNull(item) {
			p.fail(field, item.Line, "must be a list of strings; found %s", nodeKind(item))
			continue
		}
		out = append(out, item.Value)
	}
	return out
}

// expandedMap reads a mapping of strings and expands ${VAR} in each value.
func (p *toolParser) expandedMap(fields map[string]*yaml.Node, field string, lookup func(string) (string, bool)) map[string]string {
	n := fields[field]
	if n == nil || isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.fail(field, n.Line, "must be a mapping from name to value, found %s", nodeKind(n))
		return nil
	}
	raw := p.mapping(n, field, nil)
	out := make(map[string]string, len(raw))
	for _, key := range slices.Sorted(maps.Keys(raw)) {
		v := raw[key]
		full := field + "." + key
		if v.Kind != yaml.ScalarNode || isNull(v) {
			p.fail(full, v.Line, "must be a string, found %s", nodeKind(v))
			continue
		}
		s, err := ExpandEnv(v.Value, lookup)
		if err != nil {
			p.fail(full, v.Line, "%v", err)
			continue
		}
		out[key] = s
	}
	return out
}

var envReference = regexp.MustCompile(`\$\{([^}]*)\}`)

// ExpandEnv replaces every ${VAR} in s with the variable's value from lookup. A variable that
// is not set is an error naming it: a header "Bearer " with the token missing would fail
// later, far from its cause. Only the braced form is expanded, so a literal "$" stays.
func ExpandEnv(s string, lookup func(string) (string, bool)) (string, error) {
	var missing []string
	out := envReference.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		v, ok := lookup(name)
		if !ok || name == "" {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set", strings.Join(missing, ", "))
	}
	return out, nil
}

// checkUpstreamTools checks the upstream keys of the tools: the upstream exists, and a tool
// executed upstream has no webhook. It fills in UpstreamTool and marks every such tool
// unavailable until Import has seen the upstream's list.
func (r *Registry) checkUpstreamTools() []error {
	var errs []error
	for _, name := range r.names {
		t := r.tools[name]
		if t.Upstream == "" && t.UpstreamTool != "" {
			errs = append(errs, fmt.Errorf("tool %q, field %q: names an upstream tool but no upstream; add upstream", name, "upstream_tool"))
			continue
		}
		if t.Upstream == "" && !t.HasWebhook() {
			// An entry named like an import overrides it, so it is executed upstream even
			// before the upstream is listed (never by the agent, by mistake).
			importers := r.importersOf(name)
			if len(importers) > 1 {
				errs = append(errs, fmt.Errorf("tool %q: imported by upstreams %s; set upstream to say which", name, strings.Join(importers, " and ")))
				continue
			}
			if len(importers) == 0 {
				continue
			}
			t.Upstream = importers[0]
		}
		if t.Upstream == "" {
			continue
		}
		u, ok := r.upstreams[t.Upstream]
		if !ok {
			errs = append(errs, fmt.Errorf("tool %q, field %q: no upstream is named %q; known upstreams: %s", name, "upstream", t.Upstream, strings.Join(slices.Sorted(maps.Keys(r.upstreams)), ", ")))
			continue
		}
		if t.HasWebhook() {
			errs = append(errs, fmt.Errorf("tool %q: has both a webhook executor and upstream %q; a tool is executed one way", name, t.Upstream))
			continue
		}
		if t.ClaimTimeout <= u.Timeout {
			errs = append(errs, claimTooShort(name, t.ClaimTimeout, u))
			continue
		}
		if t.UpstreamTool == "" {
			t.UpstreamTool = strings.TrimPrefix(name, u.Prefix)
		}
		t.Unavailable = fmt.Sprintf("upstream %s has not been listed yet", t.Upstream)
		r.tools[name] = t
	}
	return errs
}

// importersOf names the upstreams whose import surely yields the tool name: a list that names
// it, or import all with a prefix. (With import all and no prefix any name would match; such
// an override is recognised by Import, once the upstream's list is known.)
func (r *Registry) importersOf(name string) []string {
	var out []string
	for _, uname := range slices.Sorted(maps.Keys(r.upstreams)) {
		u := r.upstreams[uname]
		rest, ok := strings.CutPrefix(name, u.Prefix)
		if ok && (slices.Contains(u.Import, rest) || u.ImportAll && u.Prefix != "") {
			out = append(out, uname)
		}
	}
	return out
}

// claimTooShort is the error for a tool whose claim would go stale while a call is running.
func claimTooShort(name string, claim time.Duration, u Upstream) error {
	return fmt.Errorf("tool %q: claim_timeout %s must be longer than upstream %s's timeout %s, so a call ends before its claim goes stale; set claim_timeout in a tools: entry", name, claim, u.Name, u.Timeout)
}

// UpstreamTool is one tool as an upstream MCP server lists it.
type UpstreamTool struct {
	Name        string
	Description string
	InputSchema json.RawMessage // JSON Schema as the upstream sent it
	Annotations Annotations
}

// UpstreamListing is what is known of one upstream: the tools it listed, and, when it cannot
// be reached, why. Tools may hold the last list seen before the upstream went down.
type UpstreamListing struct {
	Tools       []UpstreamTool
	Unavailable string // empty when the upstream is connected
}

// Reasons given for the class of an imported tool.
const (
	reasonUpstreamPrefix  = "upstream %s's " // followed by an annotation reason
	reasonUpstreamUnknown = "upstream %s has not listed this tool, so its annotations are unknown: treated as at-most-once (fail closed)"
	reasonUntrusted       = "upstream %s's annotations are its own claims and it has no trust_annotations: true, so at-most-once (fail closed; they alone would make it %s)"
	reasonApprovalKept    = "the tools file gives it an approval rule, which at-least-once tools take none of, so at-most-once (fail closed; alone, %s)"
)

const fileOrigin = "defined in the tools file"

// Import returns the registry with the upstreams' tools merged in; r is not changed. Per
// upstream (by name in listings; an upstream missing from listings counts as not yet
// listed), each imported tool gets the prefix, the upstream's description, schema and
// annotations, and the class its annotations give (docs/tools-file.md, "Classification"). A tools:
// entry of the same name, or one that names the upstream tool, overrides any field it sets.
// Tools whose upstream is down or does not list them are kept with Unavailable saying why.
// Two tools of one name (two upstreams, or an import and a file tool for something else) are
// an error naming both.
func (r *Registry) Import(listings map[string]UpstreamListing) (*Registry, error) {
	// The groups and channels are the file's, unchanged: a registry with
	// the upstreams' tools imported is the one the Service routes and
	// sends notifications by.
	out := &Registry{Hash: r.Hash, tools: make(map[string]Tool, len(r.tools)), upstreams: r.upstreams, explicit: r.explicit,
		routing: r.routing}
	out.listed = map[string]bool{}
	origin := map[string]string{} // tool name -> where it came from, for collision messages
	for name, t := range r.tools {
		out.tools[name] = t.clone()
		if t.Upstream == "" {
			origin[name] = fileOrigin
		} else {
			origin[name] = fmt.Sprintf("defined in the tools file for upstream %s tool %s", t.Upstream, t.UpstreamTool)
		}
	}
	var errs []error
	for _, uname := range slices.Sorted(maps.Keys(r.upstreams)) {
		u := r.upstreams[uname]
		listing, listed := listings[uname]
		down := listing.Unavailable
		if !listed {
			down = "not listed yet"
		}
		byName := map[string]UpstreamTool{}
		for _, ut := range listing.Tools {
			byName[ut.Name] = ut
		}
		wanted := map[string]bool{}
		if u.ImportAll {
			for n := range byName {
				wanted[n] = true
			}
		}
		for _, n := range u.Import {
			wanted[n] = true
		}
		for _, uTool := range slices.Sorted(maps.Keys(wanted)) {
			name := u.Prefix + uTool
			from := fmt.Sprintf("imported from upstream %s tool %s", uname, uTool)
			if err := checkToolName(name); err != nil {
				errs = append(errs, fmt.Errorf("tool %q (%s): %w", name, from, err))
				continue
			}
			existing, ok := out.tools[name]
			switch {
			case !ok && DefaultClaimTimeout <= u.Timeout:
				errs = append(errs, claimTooShort(name, DefaultClaimTimeout, u))
			case !ok:
				out.tools[name] = Tool{Name: name, Registered: true, ClaimTimeout: DefaultClaimTimeout,
					ExpiresAfter: DefaultExpiresAfter, Upstream: uname, UpstreamTool: uTool}
				origin[name] = from
			case origin[name] == fileOrigin && !existing.HasWebhook():
				// A plain tools: entry of the imported name overrides the import.
				existing.Upstream, existing.UpstreamTool = uname, uTool
				out.tools[name] = existing
				origin[name] = from
			case existing.Upstream == uname && existing.UpstreamTool == uTool:
				// The tools: entry already names this upstream tool.
			default:
				errs = append(errs, fmt.Errorf("tool %q: %s, and %s; rename one (prefix) or drop the import", name, origin[name], from))
			}
		}
		for name, t := range out.tools {
			if t.Upstream != uname {
				continue
			}
			ut, ok := byName[t.UpstreamTool]
			switch {
			case down != "":
				t.Unavailable = fmt.Sprintf("upstream %s is unavailable: %s", uname, down)
			case !ok:
				t.Unavailable = fmt.Sprintf("upstream %s does not list tool %s", uname, t.UpstreamTool)
			default:
				t.Unavailable = ""
			}
			if ok {
				t = r.mergeUpstreamTool(t, ut)
				out.listed[name] = true
			} else if !r.set(name, "class") && !r.set(name, "annotations") {
				t.Class, t.Reason = AtMostOnce, fmt.Sprintf(reasonUpstreamUnknown, uname)
			}
			out.tools[name] = t
		}
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return nil, errors.Join(errs...)
	}
	out.names = slices.Sorted(maps.Keys(out.tools))
	return out, nil
}

// set reports whether the tools file sets key on the tool name.
func (r *Registry) set(name, key string) bool { return slices.Contains(r.explicit[name], key) }

// mergeUpstreamTool fills the fields the tools file leaves unset from the upstream's
// definition and derives the class from the upstream's annotations.
func (r *Registry) mergeUpstreamTool(t Tool, ut UpstreamTool) Tool {
	if !r.set(t.Name, "description") {
		t.Description = ut.Description
	}
	if !r.set(t.Name, "annotations") {
		t.Annotations = ut.Annotations.clone()
		derived, reason := classify(t.Annotations)
		reason = fmt.Sprintf(reasonUpstreamPrefix, t.Upstream) + reason
		switch {
		case r.set(t.Name, "class"):
			if derived != t.Class {
				t.Reason = fmt.Sprintf("%s (upstream %s's annotations alone would make it %s)", reasonClassSet, t.Upstream, derived)
			} else {
				t.Reason = reasonClassSet
			}
		case !r.upstreams[t.Upstream].TrustAnnotations && derived != AtMostOnce:
			// The upstream's claim alone never spares an action the human.
			t.Class, t.Reason = AtMostOnce, fmt.Sprintf(reasonUntrusted, t.Upstream, derived)
		case derived == AtLeastOnce && r.set(t.Name, "approval"):
			// At-least-once takes no approval rule: the file's rule (and
			// its policy) would be dropped unseen, so the upstream's claim
			// does not lower the tool below where the rule applies.
			t.Class, t.Reason = AtMostOnce, fmt.Sprintf(reasonApprovalKept, reason)
		default:
			t.Class, t.Reason = derived, reason
		}
	}
	if !r.set(t.Name, "schema") {
		t.Schema = nil
		if len(ut.InputSchema) > 0 {
			schema, err := upstreamSchema(ut.InputSchema)
			if err != nil && t.Unavailable == "" {
				t.Unavailable = fmt.Sprintf("upstream %s lists tool %s with an input schema approvals cannot use: %v", t.Upstream, t.UpstreamTool, err)
			}
			t.Schema = schema
		}
	}
	return t
}

// upstreamSchema checks an upstream's input schema as the tools file's schemas are checked.
func upstreamSchema(raw json.RawMessage) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	js := json.RawMessage(buf.Bytes())
	if err := compileSchema(js).err; err != nil {
		return nil, fmt.Errorf("not a valid JSON Schema: %s", schemaError(err))
	}
	var top struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(js, &top) == nil {
		if _, ok := top.Properties[FieldIntentKey]; ok {
			return nil, fmt.Errorf("property %q is reserved for the intent key", FieldIntentKey)
		}
		if _, ok := top.Properties[FieldPlan]; ok {
			return nil, fmt.Errorf("property %q is reserved for the plan a call is a step of", FieldPlan)
		}
	}
	return js, nil
}

func (a Annotations) clone() Annotations {
	return Annotations{ReadOnlyHint: cloneBool(a.ReadOnlyHint), IdempotentHint: cloneBool(a.IdempotentHint), OpenWorldHint: cloneBool(a.OpenWorldHint)}
}

// upstreamGuidance is the guidance of a tool that approvals calls on its upstream itself.
func (t *Tool) upstreamGuidance() string {
	switch t.Class {
	case AtLeastOnce:
		return "approvals calls the upstream tool at once and answers with the final action: done with the tool's result, " +
			"or failed with its error. Safe to repeat: nothing is held."
	case ExactlyOnce:
		return "approvals claims the intent, calls the upstream tool once and answers with the final action (done or failed, with the tool's result). " +
			"A result in_progress means the outcome is unknown: an operator reconciles it; never call the tool again or by other means. " +
			"After a timeout or error, call find_actions with the intent key first."
	}
	return Guidance(AtMostOnce) + " Once approved, approvals calls the upstream tool itself: never call it by other means."
}

// Reimport is Import after a re-list (tools/list_changed, a reconnect): prev is the registry
// the last import made, and no imported tool's class is lower in the result than any class a
// listing of its upstream tool gave it since the tools file was read (at-most-once, then
// exactly-once, then at-least-once from strictest down), so an upstream cannot spare a tool
// the human by changing what it says, nor by dropping the tool and listing it again; only a
// changed tools file (a prev of another Hash, or none: a restart) does. changes lists every
// class that differs from prev, and every tool added or removed, for the log.
func (r *Registry) Reimport(prev *Registry, listings map[string]UpstreamListing) (*Registry, []ClassChange, error) {
	out, err := r.Import(listings)
	if err != nil {
		return nil, nil, err
	}
	out.learnt = map[string]learntClass{}
	if prev != nil && prev.Hash == r.Hash {
		// Kept for tools absent from this listing too: a tool dropped now and listed
		// again later finds its floor.
		maps.Copy(out.learnt, prev.learnt)
	}
	for name, t := range out.tools {
		if t.Upstream == "" {
			continue
		}
		l, ok := out.learnt[name]
		if ok && l.upstream == t.Upstream && l.tool == t.UpstreamTool && strictness(l.class) > strictness(t.Class) {
			t.Reason = fmt.Sprintf("kept %s from an earlier listing: upstream %s now makes it %s, but a re-list never lowers a class until the tools file changes", l.class, t.Upstream, t.Class)
			t.Class = l.class
			out.tools[name] = t
		}
		if out.listed[name] {
			out.learnt[name] = learntClass{upstream: t.Upstream, tool: t.UpstreamTool, class: t.Class}
		}
	}
	return out, ClassChanges(prev, out), nil
}

// learntClass is the strictest class a listing of upstream tool tool gave an imported tool.
type learntClass struct {
	upstream, tool string
	class          Class
}

// strictness orders the classes by how much a human sees: at-most-once highest.
func strictness(c Class) int {
	switch c {
	case AtMostOnce:
		return 2
	case ExactlyOnce:
		return 1
	}
	return 0
}

// ClassChange is one tool whose class differs between two registries; From is "" for a tool
// added, To "" for one removed.
type ClassChange struct {
	Tool     string
	From, To Class
	Reason   string // why it has To now
}

// ClassChanges lists, by tool name, what differs in class between prev and next (nil prev:
// every tool of next is added).
func ClassChanges(prev, next *Registry) []ClassChange {
	var out []ClassChange
	names := map[string]bool{}
	for _, t := range next.Tools() {
		names[t.Name] = true
	}
	for _, t := range prev.Tools() {
		names[t.Name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		var c ClassChange
		c.Tool = name
		if prev != nil {
			if t, ok := prev.tools[name]; ok {
				c.From = t.Class
			}
		}
		if t, ok := next.tools[name]; ok {
			c.To, c.Reason = t.Class, t.Reason
		}
		if c.From != c.To {
			out = append(out, c)
		}
	}
	return out
}

package classify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Options are the parts of the environment a tools file is checked against.
type Options struct {
	// WebhookSecretSet says APPROVALS_WEBHOOK_SECRET is set; a webhook tool without it is an
	// invalid file, because its deliveries could not be signed.
	WebhookSecretSet bool
	// WebhookSecret is APPROVALS_WEBHOOK_SECRET itself, when known: a webhook channel's own
	// secret must not sign as it does (an event receiver could forge executions).
	WebhookSecret string
	// LookupEnv resolves ${VAR} in upstream headers and env and in secrets; nil means
	// os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// SlackConfigured says the Slack bot token and signing secret are set; a Slack channel
	// without them could never be told anything.
	SlackConfigured bool
	// SMTPConfigured says APPROVALS_SMTP_URL and APPROVALS_SMTP_FROM are set; an email
	// channel needs them.
	SMTPConfigured bool
	// TelegramConfigured says APPROVALS_TELEGRAM_BOT_TOKEN and APPROVALS_TELEGRAM_SECRET
	// are set; a Telegram channel needs them.
	TelegramConfigured bool
}

// Registry is the set of tools from one tools file.
type Registry struct {
	Hash  string // hex SHA-256 of the file bytes; "" for Empty
	tools map[string]Tool
	names []string // sorted
	// upstreams are the MCP servers of the file, by name; explicit holds, per tool of the
	// file, the keys it sets, which an upstream's definition of the tool must not override.
	upstreams map[string]Upstream
	explicit  map[string][]string
	// listed holds the imported tools whose class came from their upstream's listing in
	// this import (not from "not listed yet").
	listed map[string]bool
	// learnt holds, per imported tool, the strictest class a listing of its upstream tool
	// gave it since the process read the tools file: the floor Reimport keeps, whatever the
	// listings in between said (the tool dropped, the upstream down).
	learnt map[string]learntClass
	routing
}

// Empty is the registry of a server without a tools file: every tool is Unregistered.
func Empty() *Registry { return &Registry{tools: map[string]Tool{}} }

// Lookup returns the named tool, or Unregistered(name) and false.
func (r *Registry) Lookup(name string) (Tool, bool) {
	if r != nil {
		if t, ok := r.tools[name]; ok {
			return t.clone(), true
		}
	}
	return Unregistered(name), false
}

// Tools returns every tool, sorted by name.
func (r *Registry) Tools() []Tool {
	if r == nil {
		return nil
	}
	out := make([]Tool, 0, len(r.names))
	for _, name := range r.names {
		out = append(out, r.tools[name].clone())
	}
	return out
}

// Load reads and parses the tools file at path. Every error names the file.
func Load(path string, opts Options) (*Registry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tools file: %w", err) // *PathError names the file
	}
	r, err := Parse(data, opts)
	if err != nil {
		return nil, prefixErrors(fmt.Sprintf("tools file %s: ", path), err)
	}
	return r, nil
}

// prefixErrors puts prefix before each error of a joined error, so that every line of the
// message names the file.
func prefixErrors(prefix string, err error) error {
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return fmt.Errorf("%s%w", prefix, err)
	}
	var out []error
	for _, e := range joined.Unwrap() {
		out = append(out, fmt.Errorf("%s%w", prefix, e))
	}
	return errors.Join(out...)
}

// toolKeys are the keys of a tool definition, in the order the error message lists them.
var toolKeys = []string{"annotations", "approval", "check", "claim_timeout", "class", "description", "executor", "expires_after", "intent", "preview", "schema", "upstream", "upstream_tool", "verify"}

// reservedNames are the MCP endpoint's own tools; a registered tool of the same name would
// hide one of them.
var reservedNames = []string{"cancel_action", "complete_action", "execute_action", "fail_action", "find_actions", "get_action", "get_plan", "list_tools", "propose_plan", "verify_action"}

// Reserved reports whether name belongs to one of the MCP endpoint's own tools, which a tools
// file may not define.
func Reserved(name string) bool { return slices.Contains(reservedNames, name) }

// Parse reads a tools file. All problems are reported at once, joined, one per line, each
// naming the tool, the field and the line. Unknown keys are errors at every level: a typo
// such as "clas:" must not silently turn a refund into an at-most-once tool.
func Parse(data []byte, opts Options) (*Registry, error) {
	sum := sha256.Sum256(data)
	r := &Registry{Hash: hex.EncodeToString(sum[:]), tools: map[string]Tool{}, upstreams: map[string]Upstream{}, explicit: map[string][]string{}}

	// Strictness comes from walking the node tree (toolParser.mapping) rather than from
	// Decoder.KnownFields: its errors name a line and a Go type, ours the tool and the key.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New(`the file is empty: expected a top-level "tools:" mapping`)
		}
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New(`the file holds more than one YAML document ("---"); put every tool under one "tools:" mapping`)
	}
	root := resolveAlias(&doc)
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = resolveAlias(root.Content[0])
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf(`line %d: expected a top-level "tools:" mapping, found %s`, root.Line, nodeKind(root))
	}
	var toolsNode, upstreamsNode, groupsNode, channelsNode *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k := root.Content[i]
		var dst **yaml.Node
		switch k.Value {
		case "tools":
			dst = &toolsNode
		case "upstreams":
			dst = &upstreamsNode
		case "groups":
			dst = &groupsNode
		case "channels":
			dst = &channelsNode
		default:
			return nil, fmt.Errorf(`line %d: unknown top-level key %q; the file has the keys "tools", "upstreams", "groups" and "channels"`, k.Line, k.Value)
		}
		if *dst != nil {
			return nil, fmt.Errorf(`line %d: key %q appears twice`, k.Line, k.Value)
		}
		*dst = resolveAlias(root.Content[i+1])
	}
	var errs []error
	// Groups and channels come first: the tools' approval rules refer to them.
	r.routing, errs = parseRouting(groupsNode, channelsNode, opts)
	if upstreamsNode != nil {
		var uerrs []error
		r.upstreams, uerrs = parseUpstreams(upstreamsNode, opts)
		errs = append(errs, uerrs...)
	}
	if toolsNode == nil && upstreamsNode == nil {
		return nil, errors.New(`expected a top-level "tools:" mapping`)
	}
	if toolsNode == nil || isNull(toolsNode) {
		// "tools:" with nothing under it: no tools but the imported ones
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		return r, nil
	}
	if toolsNode.Kind != yaml.MappingNode {
		return nil, fmt.Errorf(`line %d: "tools" must be a mapping from tool name to definition, found %s`, toolsNode.Line, nodeKind(toolsNode))
	}

	seen := map[string]int{}
	for i := 0; i+1 < len(toolsNode.Content); i += 2 {
		k, v := toolsNode.Content[i], resolveAlias(toolsNode.Content[i+1])
		name := k.Value
		if line, dup := seen[name]; dup {
			errs = append(errs, fmt.Errorf("tool %q (line %d): defined twice (first at line %d)", name, k.Line, line))
			continue
		}
		seen[name] = k.Line
		if err := checkToolName(name); err != nil {
			errs = append(errs, fmt.Errorf("tool %q (line %d): %w", name, k.Line, err))
			continue
		}
		p := &toolParser{name: name, line: k.Line, opts: opts, routing: &r.routing}
		t := p.parse(v)
		if len(p.errs) > 0 {
			errs = append(errs, p.errs...)
			continue
		}
		r.tools[name] = t
		r.names = append(r.names, name)
		r.explicit[name] = p.keys
	}
	errs = append(errs, r.checkUpstreamTools()...)
	errs = append(errs, r.checkVerifierUpstreamNames()...)
	errs = append(errs, r.checkSigningKeys(opts)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.Sort(r.names)
	return r, nil
}

func checkToolName(name string) error {
	if name == "" || len(name) > MaxToolNameLength {
		return fmt.Errorf("a tool name has 1 to %d characters", MaxToolNameLength)
	}
	for _, c := range name {
		// ':' namespaces the calls of a coding agent's hook, such as claude-code:Bash.
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' || c == ':'
		if !ok {
			return fmt.Errorf("a tool name uses only letters, digits, '_', '.', '-' and ':'; %q is not allowed", c)
		}
	}
	if Reserved(name) {
		return errors.New("the name belongs to one of the MCP endpoint's own tools; choose another")
	}
	return nil
}

// toolParser turns one tool's YAML node into a Tool, collecting every problem it finds.
type toolParser struct {
	name string
	line int
	opts Options
	errs []error
	keys []string // the keys the definition sets, sorted
	// subject is what the messages call the thing parsed: "tool" unless set ("channel").
	subject string
	// routing holds the groups and channels an approval rule may name.
	routing *routing
}

// what names the parsed thing in messages: `tool "send_email"`.
func (p *toolParser) what() string {
	if p.subject == "" {
		return fmt.Sprintf("tool %q", p.name)
	}
	return fmt.Sprintf("%s %q", p.subject, p.name)
}

func (p *toolParser) fail(field string, line int, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s, field %q (line %d): %s", p.what(), field, line, fmt.Sprintf(format, args...)))
}

func (p *toolParser) parse(def *yaml.Node) Tool {
	t := Tool{Name: p.name, Registered: true, ClaimTimeout: DefaultClaimTimeout, ExpiresAfter: DefaultExpiresAfter}
	if isNull(def) {
		def = &yaml.Node{Kind: yaml.MappingNode, Line: p.line}
	}
	if def.Kind != yaml.MappingNode {
		p.errs = append(p.errs, fmt.Errorf("tool %q (line %d): the definition must be a mapping of keys (%s), found %s", p.name, def.Line, strings.Join(toolKeys, ", "), nodeKind(def)))
		return t
	}
	fields := p.mapping(def, "", toolKeys)
	p.keys = slices.Sorted(maps.Keys(fields))
	p.scalar(fields, "upstream", &t.Upstream)
	p.scalar(fields, "upstream_tool", &t.UpstreamTool)

	var class string
	classSet := p.scalar(fields, "class", &class)
	if classSet && !Class(class).Valid() {
		p.fail("class", fields["class"].Line, "%q is not a class; use exactly-once, at-least-once or at-most-once", class)
	}
	p.scalar(fields, "description", &t.Description)
	p.scalar(fields, "check", &t.Check)
	if p.scalar(fields, "intent", &t.Intent) {
		if t.Intent == "" {
			p.fail("intent", fields["intent"].Line, "empty template; leave the key out to have callers supply the intent key")
		} else if tm, err := parseTemplate(t.Intent); err != nil {
			p.fail("intent", fields["intent"].Line, "template %q: %v", t.Intent, err)
		} else if tm.fields() == 0 {
			p.fail("intent", fields["intent"].Line, "template %q names no {field}, so every call would share one key; use payload fields such as {order_id}", t.Intent)
		}
	}
	p.duration(fields, "claim_timeout", "claim_timeout", &t.ClaimTimeout)
	p.duration(fields, "expires_after", "expires_after", &t.ExpiresAfter)
	if n := fields["annotations"]; n != nil {
		t.Annotations = p.annotations(n)
	}

	t.Class, t.Reason = classify(t.Annotations)
	if classSet {
		derived := t.Class
		t.Class, t.Reason = Class(class), reasonClassSet
		if derived != t.Class {
			t.Reason = fmt.Sprintf("%s (the annotations alone would make it %s)", reasonClassSet, derived)
		}
	}

	if n := fields["executor"]; n != nil && !isNull(n) {
		t.Executor = p.executor(n, &t)
	}
	if n := fields["preview"]; n != nil && !isNull(n) {
		t.Preview = p.preview(n)
	}
	if n := fields["schema"]; n != nil && !isNull(n) {
		t.Schema = p.schema(n)
	}
	if n := fields["approval"]; n != nil && !isNull(n) {
		t.Approval = p.approval(n, &t)
	}
	if n := fields["verify"]; n != nil && !isNull(n) {
		t.Verify = p.verify(n, &t)
	}
	return t
}

// mapping returns the values of a mapping node by key, reporting unknown and repeated keys.
// field names the mapping in error messages ("" for the tool itself); known nil accepts any
// key. YAML merge keys ("<<: *defaults") are honoured; explicit keys win over merged ones.
func (p *toolParser) mapping(n *yaml.Node, field string, known []string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	var merged []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolveAlias(n.Content[i+1])
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, v)
			continue
		}
		p.mappingKey(out, k, v, field, known)
	}
	for _, m := range merged {
		sources := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			sources = m.Content
		}
		for _, src := range sources {
			src = resolveAlias(src)
			if src.Kind != yaml.MappingNode {
				p.errs = append(p.errs, fmt.Errorf("%s (line %d): a merge key (<<) needs a mapping, found %s", p.what(), src.Line, nodeKind(src)))
				continue
			}
			inner := p.mapping(src, field, known)
			for name, v := range inner {
				if out[name] == nil {
					out[name] = v
				}
			}
		}
	}
	return out
}

func (p *toolParser) mappingKey(out map[string]*yaml.Node, k, v *yaml.Node, field string, known []string) {
	name := k.Value
	if k.Kind != yaml.ScalarNode {
		p.errs = append(p.errs, fmt.Errorf("%s (line %d): a key must be a plain name, found %s", p.what(), k.Line, nodeKind(k)))
		return
	}
	full := name
	if field != "" {
		full = field + "." + name
	}
	switch {
	case known != nil && !slices.Contains(known, name):
		where := p.what()
		if field != "" {
			where = fmt.Sprintf("%s, field %q", p.what(), field)
		}
		p.errs = append(p.errs, fmt.Errorf("%s (line %d): unknown key %q; known keys: %s", where, k.Line, name, strings.Join(known, ", ")))
	case out[name] != nil:
		p.fail(full, k.Line, "key appears twice (first at line %d)", out[name].Line)
	default:
		out[name] = v
	}
}

// scalar decodes a string field; it reports whether the field is present and not null.
func (p *toolParser) scalar(fields map[string]*yaml.Node, key string, dst *string) bool {
	return p.scalarAt(fields, key, key, dst)
}

// scalarAt is scalar for a nested key; field is its full name for messages ("executor.webhook").
func (p *toolParser) scalarAt(fields map[string]*yaml.Node, key, field string, dst *string) bool {
	n := fields[key]
	if n == nil || isNull(n) {
		return false
	}
	if n.Kind != yaml.ScalarNode {
		p.fail(field, n.Line, "must be a string, found %s", nodeKind(n))
		return false
	}
	*dst = n.Value
	return true
}

func (p *toolParser) duration(fields map[string]*yaml.Node, key, field string, dst *time.Duration) bool {
	var s string
	if !p.scalarAt(fields, key, field, &s) {
		return false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		p.fail(field, fields[key].Line, "%q is not a duration; write a Go duration such as \"90s\", \"10m\" or \"72h\"", s)
		return false
	}
	if d <= 0 {
		p.fail(field, fields[key].Line, "%q must be longer than zero", s)
		return false
	}
	*dst = d
	return true
}

func (p *toolParser) annotations(n *yaml.Node) Annotations {
	var a Annotations
	if isNull(n) {
		return a
	}
	if n.Kind != yaml.MappingNode {
		p.fail("annotations", n.Line, "must be a mapping of MCP hints (readOnlyHint, idempotentHint, openWorldHint), found %s", nodeKind(n))
		return a
	}
	fields := p.mapping(n, "annotations", []string{"idempotentHint", "openWorldHint", "readOnlyHint"})
	a.ReadOnlyHint = p.boolean(fields, "readOnlyHint")
	a.IdempotentHint = p.boolean(fields, "idempotentHint")
	a.OpenWorldHint = p.boolean(fields, "openWorldHint")
	return a
}

func (p *toolParser) boolean(fields map[string]*yaml.Node, field string) *bool {
	n := fields[field]
	if n == nil || isNull(n) {
		return nil
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		p.fail("annotations."+field, n.Line, "must be true or false, found %q", n.Value)
		return nil
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		p.fail("annotations."+field, n.Line, "must be true or false: %v", err)
		return nil
	}
	return &b
}

func (p *toolParser) executor(n *yaml.Node, t *Tool) *Executor {
	if n.Kind != yaml.MappingNode {
		p.fail("executor", n.Line, "must be a mapping with webhook and timeout, found %s", nodeKind(n))
		return nil
	}
	fields := p.mapping(n, "executor", []string{"secret", "timeout", "webhook"})
	e := &Executor{}
	if !p.scalarAt(fields, "webhook", "executor.webhook", &e.Webhook) || e.Webhook == "" {
		p.fail("executor", n.Line, "needs a webhook URL; leave executor out to have the agent execute after approval")
		return nil
	}
	line := fields["webhook"].Line
	if u, err := url.Parse(e.Webhook); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.fail("executor.webhook", line, "%q is not an absolute http or https URL", e.Webhook)
	}
	if t.Class.Valid() && t.Class != AtMostOnce {
		p.fail("executor", n.Line, "a webhook executor is allowed only on at-most-once tools; this tool is %s: %s", t.Class, t.Reason)
	}
	if f := fields["secret"]; f != nil {
		e.Secret = p.secret(fields, "executor.secret")
	} else if !p.opts.WebhookSecretSet {
		p.fail("executor", n.Line, "a webhook executor needs %s (or its own secret) to sign its deliveries, and it is not set", webhookSecretVariable)
	}
	e.Timeout = min(MaxWebhookTimeout, t.ClaimTimeout/2)
	if p.duration(fields, "timeout", "executor.timeout", &e.Timeout) {
		if e.Timeout >= t.ClaimTimeout {
			p.fail("executor.timeout", fields["timeout"].Line, "%s must be shorter than claim_timeout (%s), so a delivery ends before its claim goes stale", e.Timeout, t.ClaimTimeout)
		}
	} else if e.Timeout <= 0 {
		p.fail("executor.timeout", n.Line, "claim_timeout %s is too short to derive a delivery timeout; set one", t.ClaimTimeout)
	}
	return e
}

func (p *toolParser) preview(n *yaml.Node) map[string]string {
	if n.Kind != yaml.MappingNode {
		p.fail("preview", n.Line, "must be a mapping from label to template, found %s", nodeKind(n))
		return nil
	}
	fields := p.mapping(n, "preview", nil)
	out := make(map[string]string, len(fields))
	for _, label := range slices.Sorted(maps.Keys(fields)) {
		v := fields[label]
		field := "preview." + label
		if label == "" {
			p.fail("preview", v.Line, "a preview label must not be empty")
			continue
		}
		if v.Kind != yaml.ScalarNode || isNull(v) {
			p.fail(field, v.Line, "must be a template string, found %s", nodeKind(v))
			continue
		}
		if _, err := parseTemplate(v.Value); err != nil {
			p.fail(field, v.Line, "template %q: %v", v.Value, err)
			continue
		}
		out[label] = v.Value
	}
	if len(out) == 0 {
		return nil // so the JSON snapshot (omitempty) decodes back to the same Tool
	}
	return out
}

func (p *toolParser) schema(n *yaml.Node) []byte {
	budget := 100_000
	v, err := yamlToJSON(n, 0, &budget)
	if err != nil {
		p.fail("schema", n.Line, "cannot be written as JSON: %v", err)
		return nil
	}
	js, err := marshalCompact(v)
	if err != nil {
		p.fail("schema", n.Line, "cannot be written as JSON: %v", err)
		return nil
	}
	if err := compileSchema(js).err; err != nil {
		p.fail("schema", n.Line, "not a valid JSON Schema: %s", schemaError(err))
		return nil
	}
	if m, ok := v.(map[string]any); ok {
		if props, ok := m["properties"].(map[string]any); ok {
			if _, ok := props[FieldIntentKey]; ok {
				// Over MCP the tool's arguments are the payload plus an
				// optional intent_key; a payload field of that name would
				// be taken for the key.
				p.fail("schema", n.Line, "property %q is reserved for the intent key; rename the payload field", FieldIntentKey)
				return nil
			}
			if _, ok := props[FieldPlan]; ok {
				// Likewise the plan argument: it names an approved plan.
				p.fail("schema", n.Line, "property %q is reserved for the plan a call is a step of; rename the payload field", FieldPlan)
				return nil
			}
		}
	}
	return js
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "nothing (null)"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

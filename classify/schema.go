package classify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"go.yaml.in/yaml/v3"
)

// compiledSchemas caches compiled schemas by their JSON text, so that every copy of a Tool,
// including one decoded from an action's snapshot, compiles its schema about once per
// process. An upstream sends its schemas anew on every re-list, and may change them each
// time, so the cache is bounded: past maxCompiledSchemas entries it starts over, and the
// schemas in use are compiled again as they are used.
var (
	compiledSchemas     sync.Map // string -> *compiledSchema
	compiledSchemaCount atomic.Int64
)

const maxCompiledSchemas = 1024

type compiledSchema struct {
	once   sync.Once
	schema *jsonschema.Schema
	names  *propertyNames
	err    error
}

func compileSchema(raw json.RawMessage) *compiledSchema {
	v, ok := compiledSchemas.Load(string(raw))
	if !ok {
		if compiledSchemaCount.Add(1) > maxCompiledSchemas {
			compiledSchemas.Clear()
			compiledSchemaCount.Store(1)
		}
		v, _ = compiledSchemas.LoadOrStore(string(raw), &compiledSchema{})
	}
	c := v.(*compiledSchema)
	c.once.Do(func() {
		if c.schema, c.err = doCompileSchema(raw); c.err == nil {
			c.names = schemaPropertyNames(raw)
		}
	})
	return c
}

// refuseLoading keeps compilation pure: a $ref to anything but the schema itself (a file, a
// URL) is an error instead of a read from disk or the network.
type refuseLoading struct{}

func (refuseLoading) Load(url string) (any, error) {
	return nil, fmt.Errorf("loading %s is not supported: a tool schema must be self-contained (use $defs)", url)
}

const schemaURL = "urn:approvals:tool-schema"

func doCompileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoading{})
	// "format: email" in a tool schema is meant as a check, not a comment.
	c.AssertFormat()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaURL)
}

// Validate checks payload against the tool's JSON Schema; nil when the tool has none. A
// payload that fails is a *PayloadError naming one field (the first, in a stable order) and
// the reason. Numbers may be json.Number, float64 or any Go integer.
func (t *Tool) Validate(payload any) error {
	if len(t.Schema) == 0 {
		return nil
	}
	c := compileSchema(t.Schema)
	if c.err != nil {
		// Parse compiled it; only a hand-made or corrupted Tool gets here.
		return fmt.Errorf("tool %q: schema does not compile: %w", t.Name, c.err)
	}
	if obj, ok := payload.(map[string]any); ok {
		if err := c.names.refuseCaseTwins(obj, ""); err != nil {
			return err
		}
	}
	err := c.schema.Validate(payload)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return &PayloadError{Reason: err.Error()}
	}
	return payloadErrorFrom(verr)
}

// payloadErrorFrom picks the one cause to report from a validation error tree. It descends
// through conjunctions (every branch had to hold, so any failing leaf is a real problem) and
// stops at alternatives (anyOf, oneOf, not), where a leaf would blame one arbitrary branch.
func payloadErrorFrom(e *jsonschema.ValidationError) *PayloadError {
	for len(e.Causes) > 0 {
		switch e.ErrorKind.(type) {
		case *kind.AnyOf, *kind.OneOf, *kind.Not, *kind.Contains, *kind.MinContains:
			return describeValidationError(e)
		}
		causes := slices.Clone(e.Causes)
		slices.SortStableFunc(causes, func(a, b *jsonschema.ValidationError) int {
			return strings.Compare(dotted(a.InstanceLocation), dotted(b.InstanceLocation))
		})
		e = causes[0]
	}
	return describeValidationError(e)
}

func describeValidationError(e *jsonschema.ValidationError) *PayloadError {
	at := e.InstanceLocation
	switch k := e.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf:
		if len(e.Causes) > 0 {
			return &PayloadError{Field: dotted(at), Reason: kindMessage(k) + ": " + strings.Join(leafMessages(e, dotted, 3), "; ")}
		}
	case *kind.Required:
		return missingFields(at, k.Missing, "")
	case *kind.DependentRequired:
		return missingFields(at, k.Missing, fmt.Sprintf(" (required when %q is present)", k.Prop))
	case *kind.Dependency:
		return missingFields(at, k.Missing, fmt.Sprintf(" (required when %q is present)", k.Prop))
	case *kind.AdditionalProperties:
		props := slices.Sorted(slices.Values(k.Properties))
		reason := "is not allowed here (unknown property)"
		if len(props) > 1 {
			reason += "; also not allowed: " + strings.Join(props[1:], ", ")
		}
		return &PayloadError{Field: dotted(append(slices.Clone(at), props[0])), Reason: reason}
	case *kind.FalseSchema:
		return &PayloadError{Field: dotted(at), Reason: "is not allowed here"}
	}
	return &PayloadError{Field: dotted(at), Reason: kindMessage(e.ErrorKind)}
}

// kindMessage is the library's English message for one error kind, without its location
// "at <location>: " prefix: the location is reported as the field instead.
func kindMessage(k jsonschema.ErrorKind) string {
	msg := (&jsonschema.ValidationError{ErrorKind: k}).Error()
	if _, rest, ok := strings.Cut(msg, ": "); ok {
		return rest
	}
	return msg
}

func missingFields(at, missing []string, why string) *PayloadError {
	missing = slices.Sorted(slices.Values(missing))
	reason := "missing" + why
	if len(missing) > 1 {
		reason += "; also missing: " + strings.Join(missing[1:], ", ")
	}
	return &PayloadError{Field: dotted(append(slices.Clone(at), missing[0])), Reason: reason}
}

// leafMessages lists up to limit leaf causes of e as "location: message", in a stable order.
func leafMessages(e *jsonschema.ValidationError, location func([]string) string, limit int) []string {
	var out []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			msg := kindMessage(e.ErrorKind)
			if loc := location(e.InstanceLocation); loc != "" {
				msg = fmt.Sprintf("%s: %s", loc, msg)
			}
			out = append(out, msg)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(e)
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > limit {
		out = append(out[:limit], fmt.Sprintf("and %d more", len(out)-limit))
	}
	return out
}

// schemaError puts a schema compilation error on one line.
func schemaError(err error) string {
	var serr *jsonschema.SchemaValidationError
	var verr *jsonschema.ValidationError
	if errors.As(err, &serr) && errors.As(serr.Err, &verr) {
		pointer := func(loc []string) string { return "/" + strings.Join(loc, "/") }
		return strings.Join(leafMessages(verr, pointer, 5), "; ")
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// dotted writes an instance location the way intent templates name fields: "a.b.0".
func dotted(location []string) string { return strings.Join(location, ".") }

// yamlToJSON turns a YAML node into the value encoding/json writes as the same JSON. Scalars
// keep their literal text where YAML would reinterpret it: an unquoted 2024-05-01 in a schema
// means the string "2024-05-01", not a timestamp. budget bounds the work, so aliases cannot
// expand a small file into a huge schema.
func yamlToJSON(n *yaml.Node, depth int, budget *int) (any, error) {
	*budget--
	if depth > 100 || *budget < 0 {
		return nil, errors.New("nested too deeply or too large")
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, fmt.Errorf("line %d: unknown alias", n.Line)
		}
		return yamlToJSON(n.Alias, depth+1, budget)
	case yaml.ScalarNode:
		return yamlScalar(n)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := yamlToJSON(c, depth+1, budget)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := map[string]any{}
		var merged []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: a mapping key must be a plain name", k.Line)
			}
			if k.ShortTag() == "!!merge" {
				merged = append(merged, v)
				continue
			}
			if _, dup := out[k.Value]; dup {
				return nil, fmt.Errorf("line %d: key %q appears twice", k.Line, k.Value)
			}
			j, err := yamlToJSON(v, depth+1, budget)
			if err != nil {
				return nil, err
			}
			out[k.Value] = j
		}
		// Merged keys ("<<: *base") never override explicit ones.
		for _, m := range merged {
			v, err := yamlToJSON(m, depth+1, budget)
			if err != nil {
				return nil, err
			}
			sources, ok := v.([]any)
			if !ok {
				sources = []any{v}
			}
			for _, src := range sources {
				obj, ok := src.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("line %d: a merge key (<<) needs a mapping", m.Line)
				}
				for k, v := range obj {
					if _, set := out[k]; !set {
						out[k] = v
					}
				}
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

func yamlScalar(n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!str", "!!timestamp":
		return n.Value, nil
	case "!!bool", "!!binary":
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return v, nil
	case "!!int":
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		switch v.(type) {
		case int, int64, uint64:
			return v, nil
		}
		return nil, fmt.Errorf("line %d: integer %s is out of range", n.Line, n.Value)
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("line %d: %s is not a JSON number", n.Line, n.Value)
		}
		return f, nil
	}
	return nil, fmt.Errorf("line %d: YAML tag %s has no JSON form", n.Line, n.Tag)
}

// marshalCompact writes v as compact JSON exactly as encoding/json would re-encode it
// (including its HTML escaping of "<", ">" and "&"), so a Tool's snapshot round-trips
// byte for byte.
func marshalCompact(v any) (json.RawMessage, error) {
	return json.Marshal(v)
}

// propertyNames are the property names a schema gives an object, and those of the objects
// below them: the names a receiver is told to read.
type propertyNames struct {
	exact  map[string]*propertyNames // name -> the names of its own properties (nil: none)
	folded map[string]string         // lower-cased name -> name
}

// schemaPropertyNames reads the "properties" of a schema, recursively; nil when there are
// none.
func schemaPropertyNames(raw json.RawMessage) *propertyNames {
	var sch struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(raw, &sch) != nil || len(sch.Properties) == 0 {
		return nil
	}
	n := &propertyNames{exact: map[string]*propertyNames{}, folded: map[string]string{}}
	for name, sub := range sch.Properties {
		n.exact[name] = schemaPropertyNames(sub)
		n.folded[strings.ToLower(name)] = name
	}
	return n
}

// refuseCaseTwins refuses an object key that differs only in case from a property the
// schema names ("To" beside "to"): a receiver that matches names without regard to case
// could act on the key the approver did not read as the field.
func (n *propertyNames) refuseCaseTwins(obj map[string]any, prefix string) error {
	if n == nil {
		return nil
	}
	for k, v := range obj {
		if sub, ok := n.exact[k]; ok {
			if child, ok := v.(map[string]any); ok {
				if err := sub.refuseCaseTwins(child, prefix+k+"."); err != nil {
					return err
				}
			}
			continue
		}
		if name, ok := n.folded[strings.ToLower(k)]; ok {
			return &PayloadError{Field: prefix + k, Reason: fmt.Sprintf("differs only in case from %q, which the schema names: a receiver that reads names without regard to case could act on either", name)}
		}
	}
	return nil
}

package classify

import (
	"net/url"
	"strings"

	"go.yaml.in/yaml/v3"
)

// verifyKeys are the keys of a tool's verify block.
var verifyKeys = []string{"arguments", "done", "not_done", "resolve", "result", "settle", "timeout", "tool", "upstream", "webhook"}

// verify reads a tool's verify block: how to ask, and what proves what.
func (p *toolParser) verify(n *yaml.Node, t *Tool) *Verify {
	if n.Kind != yaml.MappingNode {
		p.fail("verify", n.Line, "must be a mapping (webhook or upstream and tool, done, not_done, …), found %s", nodeKind(n))
		return nil
	}
	fields := p.mapping(n, "verify", verifyKeys)
	v := &Verify{Timeout: DefaultVerifyTimeout, Resolve: ResolveSuggest}
	hasWebhook := p.scalarAt(fields, "webhook", "verify.webhook", &v.Webhook)
	hasUpstream := p.scalarAt(fields, "upstream", "verify.upstream", &v.Upstream)
	p.scalarAt(fields, "tool", "verify.tool", &v.Tool)
	switch {
	case hasWebhook && hasUpstream:
		p.fail("verify", n.Line, "has both webhook and upstream; a verifier asks one way")
	case hasWebhook:
		if u, err := url.Parse(v.Webhook); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.fail("verify.webhook", fields["webhook"].Line, "%q is not an absolute http or https URL", v.Webhook)
		}
		if v.Tool != "" || fields["arguments"] != nil {
			p.fail("verify", n.Line, "tool and arguments belong to an upstream verifier, not a webhook one")
		}
		if t.Executor == nil || t.Executor.Secret == "" {
			if !p.opts.WebhookSecretSet {
				p.fail("verify", n.Line, "a webhook verifier needs %s (or the executor's own secret) to sign its requests, and it is not set", webhookSecretVariable)
			}
		}
	case hasUpstream:
		if v.Tool == "" {
			p.fail("verify.tool", n.Line, "an upstream verifier names the upstream's read-only tool to call")
		}
		if a := fields["arguments"]; a != nil && !isNull(a) {
			if a.Kind != yaml.MappingNode {
				p.fail("verify.arguments", a.Line, "must be a mapping from argument to template, found %s", nodeKind(a))
			} else {
				v.Arguments = map[string]string{}
				for name, val := range p.mapping(a, "verify.arguments", nil) {
					if val.Kind != yaml.ScalarNode || isNull(val) {
						p.fail("verify.arguments."+name, val.Line, "must be a template string, found %s", nodeKind(val))
						continue
					}
					if _, err := parseTemplate(val.Value); err != nil {
						p.fail("verify.arguments."+name, val.Line, "template %q: %v", val.Value, err)
						continue
					}
					v.Arguments[name] = val.Value
				}
			}
		}
	default:
		p.fail("verify", n.Line, "says how to ask: webhook (a URL), or upstream and tool (a read-only tool of an upstream MCP server)")
	}
	if p.duration(fields, "timeout", "verify.timeout", &v.Timeout) && v.Timeout > MaxVerifyTimeout {
		p.fail("verify.timeout", fields["timeout"].Line, "%s is longer than %s; a verifier answers within a minute", v.Timeout, MaxVerifyTimeout)
	}
	p.duration(fields, "settle", "verify.settle", &v.Settle)
	var resolve string
	if p.scalarAt(fields, "resolve", "verify.resolve", &resolve) {
		switch VerifyResolve(resolve) {
		case ResolveSuggest, ResolveAuto:
			v.Resolve = VerifyResolve(resolve)
		default:
			p.fail("verify.resolve", fields["resolve"].Line, "%q is not a mode; use suggest (a person resolves) or auto (a proof resolves)", resolve)
		}
	}
	for _, e := range []struct {
		key     string
		dst     *string
		boolean bool
	}{{"done", &v.Done, true}, {"not_done", &v.NotDone, true}, {"result", &v.Result, false}} {
		if !p.scalarAt(fields, e.key, "verify."+e.key, e.dst) {
			continue
		}
		if strings.TrimSpace(*e.dst) == "" {
			p.fail("verify."+e.key, fields[e.key].Line, "is empty; leave it out or write a CEL expression over response, payload, action and now")
			continue
		}
		if _, err := compiledVerify(*e.dst, e.boolean); err != nil {
			p.fail("verify."+e.key, fields[e.key].Line, "%v", err)
		}
	}
	if v.Done == "" && v.NotDone == "" {
		p.fail("verify", n.Line, "needs done or not_done: a CEL expression over the answer that proves the effect happened, or did not")
	}
	if v.Resolve == ResolveAuto && v.Done == "" {
		p.fail("verify.resolve", n.Line, "resolve: auto needs done: a proof that the effect happened")
	}
	return v
}

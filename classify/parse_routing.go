package classify

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// routing is the groups and channels of a tools file.
type routing struct {
	// groups hold each group's members, sorted and distinct: lower-cased
	// emails, and identity provider groups as "idp:NAME" (NAME as written).
	groups   map[string][]string
	channels map[string]Channel
}

// IdPPrefix marks a group member that is a group of the identity provider
// (single sign-on) rather than an email: "idp:support-leads".
const IdPPrefix = "idp:"

// maxIdPGroupLength bounds an identity provider group's name.
const maxIdPGroupLength = 256

// approvalKeys are the keys of a tool's approval rule.
var approvalKeys = []string{"approvers", "bulk", "escalate_after", "escalate_notify", "escalate_to", "grants", "notify", "policy", "remind_after", "required"}

// maxEmailLength is the longest address SMTP carries (RFC 5321 path limit).
const maxEmailLength = 254

// parseRouting reads the top-level groups and channels mappings (either may be nil).
func parseRouting(groupsNode, channelsNode *yaml.Node, opts Options) (routing, []error) {
	rt := routing{groups: map[string][]string{}, channels: map[string]Channel{}}
	var errs []error
	if groupsNode != nil && !isNull(groupsNode) {
		if groupsNode.Kind != yaml.MappingNode {
			errs = append(errs, fmt.Errorf(`line %d: "groups" must be a mapping from group name to a list of emails, found %s`, groupsNode.Line, nodeKind(groupsNode)))
		} else {
			p := &toolParser{name: "groups", subject: "section"}
			for name, n := range p.mapping(groupsNode, "", nil) {
				gp := &toolParser{name: name, line: n.Line, subject: "group"}
				if members := gp.members(n, "members"); len(gp.errs) == 0 {
					if len(members) == 0 {
						gp.fail("members", n.Line, "a group needs at least one member: an email, or an identity provider group as \"idp:NAME\"")
					}
					rt.groups[name] = members
				}
				errs = append(errs, gp.errs...)
			}
			errs = append(errs, p.errs...)
		}
	}
	if channelsNode != nil && !isNull(channelsNode) {
		if channelsNode.Kind != yaml.MappingNode {
			errs = append(errs, fmt.Errorf(`line %d: "channels" must be a mapping from channel name to its settings, found %s`, channelsNode.Line, nodeKind(channelsNode)))
		} else {
			p := &toolParser{name: "channels", subject: "section"}
			for name, n := range p.mapping(channelsNode, "", nil) {
				cp := &toolParser{name: name, line: n.Line, subject: "channel", opts: opts}
				c := cp.channel(n)
				if len(cp.errs) == 0 {
					rt.channels[name] = c
				}
				errs = append(errs, cp.errs...)
			}
			errs = append(errs, p.errs...)
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return rt, errs
}

// emails reads a list of email addresses, lower-cased, sorted and distinct.
// members reads a group's members: emails, and identity provider groups
// written "idp:NAME".
func (p *toolParser) members(n *yaml.Node, field string) []string {
	var emails, groups []string
	for _, m := range p.names(n, field) {
		if !strings.HasPrefix(m, IdPPrefix) {
			emails = append(emails, m)
			continue
		}
		name := strings.TrimPrefix(m, IdPPrefix)
		switch {
		case strings.TrimSpace(name) == "":
			p.fail(field, n.Line, "%q names no identity provider group; write it as \"idp:support-leads\"", m)
		case len(name) > maxIdPGroupLength:
			p.fail(field, n.Line, "identity provider group %q has %d characters; at most %d are allowed", string([]rune(name)[:40])+"…", len(name), maxIdPGroupLength)
		default:
			groups = append(groups, m)
		}
	}
	slices.Sort(groups)
	return append(p.emailList(emails, n, field), slices.Compact(groups)...)
}

func (p *toolParser) emails(n *yaml.Node, field string) []string {
	return p.emailList(p.names(n, field), n, field)
}

func (p *toolParser) emailList(list []string, n *yaml.Node, field string) []string {
	var out []string
	for _, e := range list {
		if len(e) > maxEmailLength || strings.Count(e, "@") != 1 || strings.HasPrefix(e, "@") || strings.HasSuffix(e, "@") || strings.ContainsAny(e, " \t\r\n<>,") {
			p.fail(field, n.Line, "%q is not an email address", e)
			continue
		}
		out = append(out, strings.ToLower(e))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// names reads a list of non-empty strings; a single string is a list of one.
func (p *toolParser) names(n *yaml.Node, field string) []string {
	n = resolveAlias(n)
	if isNull(n) {
		return nil
	}
	items := []*yaml.Node{n}
	if n.Kind == yaml.SequenceNode {
		items = n.Content
	}
	var out []string
	for _, it := range items {
		it = resolveAlias(it)
		if it.Kind != yaml.ScalarNode || isNull(it) || it.Value == "" {
			p.fail(field, it.Line, "must be a list of names, found %s", nodeKind(it))
			continue
		}
		out = append(out, it.Value)
	}
	return out
}

// channelKinds are the keys of a channel's kind, one of which each channel has.
var channelKinds = []string{KindSlack, KindEmail, KindWebhook, KindTeams, KindTelegram, KindPagerDuty}

func (p *toolParser) channel(n *yaml.Node) Channel {
	c := Channel{Name: p.name}
	kinds := "slack, email, webhook, teams, telegram or pagerduty"
	if n.Kind != yaml.MappingNode {
		p.errs = append(p.errs, fmt.Errorf("%s (line %d): must be a mapping with one of %s, found %s", p.what(), n.Line, kinds, nodeKind(n)))
		return c
	}
	fields := p.mapping(n, "", append([]string{"events", "secret"}, channelKinds...))
	found := 0
	for _, k := range channelKinds {
		if fields[k] != nil {
			found++
		}
	}
	if found != 1 {
		p.errs = append(p.errs, fmt.Errorf("%s (line %d): needs exactly one of %s, found %d", p.what(), n.Line, kinds, found))
		return c
	}
	if s := fields["slack"]; s != nil {
		if s.Kind != yaml.MappingNode {
			p.fail("slack", s.Line, "must be a mapping with channel (a Slack channel id), found %s", nodeKind(s))
		} else {
			sf := p.mapping(s, "slack", []string{"channel"})
			c.Slack = &SlackChannel{}
			if !p.scalarAt(sf, "channel", "slack.channel", &c.Slack.Channel) || c.Slack.Channel == "" {
				p.fail("slack.channel", s.Line, "needs the Slack channel id (C0APPROVALS)")
			}
		}
		if !p.opts.SlackConfigured {
			p.fail("slack", s.Line, "a Slack channel needs APPROVALS_SLACK_BOT_TOKEN and APPROVALS_SLACK_SIGNING_SECRET, and they are not set")
		}
	}
	if e := fields["email"]; e != nil {
		if e.Kind != yaml.MappingNode {
			p.fail("email", e.Line, "must be a mapping with to (a list of addresses), found %s", nodeKind(e))
		} else {
			ef := p.mapping(e, "email", []string{"to"})
			c.Email = &EmailChannel{}
			if to := ef["to"]; to != nil {
				c.Email.To = p.emails(to, "email.to")
			}
			if len(c.Email.To) == 0 {
				p.fail("email.to", e.Line, "needs at least one address")
			}
		}
		if !p.opts.SMTPConfigured {
			p.fail("email", e.Line, "an email channel needs APPROVALS_SMTP_URL and APPROVALS_SMTP_FROM, and they are not set")
		}
	}
	if t := fields["teams"]; t != nil {
		c.Teams = p.teams(t)
	}
	if t := fields["telegram"]; t != nil {
		c.Telegram = p.telegram(t)
	}
	if pd := fields["pagerduty"]; pd != nil {
		c.PagerDuty = p.pagerDuty(pd)
	}
	if w := fields["webhook"]; w != nil {
		if p.scalarAt(fields, "webhook", "webhook", &c.Webhook) {
			if u, err := url.Parse(c.Webhook); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				p.fail("webhook", w.Line, "%q is not an absolute http or https URL", c.Webhook)
			}
		} else {
			p.fail("webhook", w.Line, "needs the URL that receives the events")
		}
		if fields["secret"] == nil {
			p.fail("secret", w.Line, `a webhook channel signs its events with its own secret (secret: "${VAR}"), never %s: a receiver of events must not hold the key that signs executions`, webhookSecretVariable)
		} else {
			c.Secret = p.secret(fields, "secret")
		}
	} else if f := fields["secret"]; f != nil {
		p.fail("secret", f.Line, "only a webhook channel has a secret")
	}
	if ev := fields["events"]; ev != nil {
		for _, t := range p.names(ev, "events") {
			if !slices.Contains(EventTypes, t) {
				p.fail("events", ev.Line, "%q is not an event type; known types: %s", t, strings.Join(EventTypes, ", "))
				continue
			}
			if !slices.Contains(c.Events, t) {
				c.Events = append(c.Events, t)
			}
		}
		if len(c.Events) == 0 && len(p.errs) == 0 {
			p.fail("events", ev.Line, "an empty list would tell the channel nothing; leave events out to follow the tools' notify lists")
		}
	}
	return c
}

// teams reads { webhook: URL }: a Teams Workflows webhook, whose URL is its credential.
func (p *toolParser) teams(n *yaml.Node) *TeamsChannel {
	t := &TeamsChannel{}
	if n.Kind != yaml.MappingNode {
		p.fail("teams", n.Line, "must be a mapping with webhook (a Teams Workflows URL), found %s", nodeKind(n))
		return t
	}
	f := p.mapping(n, "teams", []string{"webhook"})
	var raw string
	if !p.scalarAt(f, "webhook", "teams.webhook", &raw) || raw == "" {
		p.fail("teams.webhook", n.Line, "needs the Workflows webhook URL (the Teams channel's \"Post to a channel when a webhook request is received\" workflow)")
		return t
	}
	// The URL is a credential: "${TEAMS_WEBHOOK_URL}" keeps it out of the file.
	t.Webhook = p.expand(raw, "teams.webhook", f["webhook"].Line)
	if t.Webhook == "" {
		return t
	}
	if u, err := url.Parse(t.Webhook); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL is the credential: the message names its field, never its text.
		p.fail("teams.webhook", f["webhook"].Line, "is not an absolute http or https URL")
	}
	return t
}

// telegramChatID is a chat's numeric id (groups and channels are negative) or a public
// channel's @username.
var telegramChatID = regexp.MustCompile(`^(-?[0-9]{1,20}|@[A-Za-z][A-Za-z0-9_]{3,31})$`)

// telegram reads { chat_id: "-100123" }.
func (p *toolParser) telegram(n *yaml.Node) *TelegramChannel {
	t := &TelegramChannel{}
	if n.Kind != yaml.MappingNode {
		p.fail("telegram", n.Line, "must be a mapping with chat_id (a Telegram chat id such as \"-100123\"), found %s", nodeKind(n))
	} else {
		f := p.mapping(n, "telegram", []string{"chat_id"})
		if !p.scalarAt(f, "chat_id", "telegram.chat_id", &t.ChatID) || t.ChatID == "" {
			p.fail("telegram.chat_id", n.Line, "needs the Telegram chat id (\"-100123\", or a channel's @username)")
		} else if !telegramChatID.MatchString(t.ChatID) {
			p.fail("telegram.chat_id", f["chat_id"].Line, "%q is not a Telegram chat id (a number such as \"-100123\", or a channel's @username)", t.ChatID)
		}
	}
	if !p.opts.TelegramConfigured {
		p.fail("telegram", n.Line, "a Telegram channel needs APPROVALS_TELEGRAM_BOT_TOKEN and APPROVALS_TELEGRAM_SECRET, and they are not set")
	}
	return t
}

// pagerDuty reads { routing_key: "${PD_KEY}" }, expanded from the environment.
func (p *toolParser) pagerDuty(n *yaml.Node) *PagerDutyChannel {
	pd := &PagerDutyChannel{}
	if n.Kind != yaml.MappingNode {
		p.fail("pagerduty", n.Line, "must be a mapping with routing_key (an Events API v2 integration key, such as \"${PD_KEY}\"), found %s", nodeKind(n))
		return pd
	}
	f := p.mapping(n, "pagerduty", []string{"routing_key"})
	var raw string
	if !p.scalarAt(f, "routing_key", "pagerduty.routing_key", &raw) || raw == "" {
		p.fail("pagerduty.routing_key", n.Line, "needs the Events API v2 integration key, such as \"${PD_KEY}\"")
		return pd
	}
	key := p.expand(raw, "pagerduty.routing_key", f["routing_key"].Line)
	if strings.ContainsAny(key, " \t\r\n") {
		p.fail("pagerduty.routing_key", f["routing_key"].Line, "holds white space once expanded; an integration key has none")
	}
	pd.RoutingKey = key
	return pd
}

// expand is raw with ${VAR} taken from the environment; "" (and the error recorded) when a
// variable is unset or the result is empty.
func (p *toolParser) expand(raw, field string, line int) string {
	lookup := p.opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, err := ExpandEnv(raw, lookup)
	switch {
	case err != nil:
		p.fail(field, line, "%v", err)
		return ""
	case strings.TrimSpace(v) == "":
		p.fail(field, line, "is empty once expanded")
		return ""
	}
	return v
}

// approval reads a tool's approval rule, resolving group names to their members now: the
// action keeps the snapshot, so a later change of a group affects new submissions only.
func (p *toolParser) approval(n *yaml.Node, t *Tool) *Approval {
	if n.Kind != yaml.MappingNode {
		p.fail("approval", n.Line, "must be a mapping of keys (%s), found %s", strings.Join(approvalKeys, ", "), nodeKind(n))
		return nil
	}
	// An exactly-once tool takes one too: its policy may send some calls to a person (a
	// human rule), who is then routed and told as on an at-most-once tool.
	if t.Class == AtLeastOnce {
		p.fail("approval", n.Line, "an approval rule (and so a policy) is not allowed on at-least-once tools, which nobody approves; this tool is %s: %s", t.Class, t.Reason)
	}
	fields := p.mapping(n, "approval", approvalKeys)
	a := &Approval{Required: 1}
	// groups resolves the group names of key to their emails and their
	// identity provider groups.
	groups := func(key string) (names, emails, idpGroups []string) {
		v := fields[key]
		if v == nil {
			return nil, nil, nil
		}
		for _, g := range p.names(v, "approval."+key) {
			m, ok := p.routing.groups[g]
			if !ok {
				p.fail("approval."+key, v.Line, "unknown group %q; groups: %s", g, listOrNone(slices.Sorted(maps.Keys(p.routing.groups))))
				continue
			}
			names = append(names, g)
			for _, member := range m {
				if name, ok := strings.CutPrefix(member, IdPPrefix); ok {
					idpGroups = append(idpGroups, name)
				} else {
					emails = append(emails, member)
				}
			}
		}
		slices.Sort(emails)
		slices.Sort(idpGroups)
		return names, slices.Compact(emails), slices.Compact(idpGroups)
	}
	channels := func(key string) []string {
		v := fields[key]
		if v == nil {
			return nil
		}
		var out []string
		for _, c := range p.names(v, "approval."+key) {
			if _, ok := p.routing.channels[c]; !ok {
				p.fail("approval."+key, v.Line, "unknown channel %q; channels: %s", c, listOrNone(slices.Sorted(maps.Keys(p.routing.channels))))
				continue
			}
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
		return out
	}
	a.Approvers, a.ApproverEmails, a.ApproverIdPGroups = groups("approvers")
	a.EscalateTo, a.EscalateEmails, a.EscalateIdPGroups = groups("escalate_to")
	a.Notify = channels("notify")
	a.EscalateNotify = channels("escalate_notify")
	p.duration(fields, "remind_after", "approval.remind_after", &a.RemindAfter)
	p.duration(fields, "escalate_after", "approval.escalate_after", &a.EscalateAfter)

	if v := fields["required"]; v != nil && !isNull(v) {
		n, err := strconv.Atoi(v.Value)
		if v.Kind != yaml.ScalarNode || err != nil || n < 1 {
			p.fail("approval.required", v.Line, "must be a whole number of at least 1, found %s", nodeKind(v))
		} else {
			a.Required = n
		}
	}
	if v := fields["bulk"]; v != nil && !isNull(v) {
		var b bool
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" || v.Decode(&b) != nil {
			p.fail("approval.bulk", v.Line, "must be true or false, found %s", nodeKind(v))
		} else {
			a.Bulk = &b
		}
	}

	if v := fields["policy"]; v != nil && !isNull(v) {
		a.Policy = p.policy(v, t, a)
	}
	if v := fields["grants"]; v != nil && !isNull(v) {
		a.Grants = p.grants(v)
		if t.Class == ExactlyOnce && a.Grants != nil && !a.Grants.Disabled {
			p.fail("approval.grants", v.Line, "grants approve at-most-once actions only: an exactly-once call that no rule sends to a person is claimed at once")
		}
	}
	// Who is in an identity provider group only the provider knows: with one
	// among the eligible, the tools file cannot count them.
	if len(a.Approvers) > 0 && a.CountsPeople() {
		eligible := slices.Concat(a.ApproverEmails, a.EscalateEmails)
		slices.Sort(eligible)
		if people := len(slices.Compact(eligible)); a.Required > people && fields["required"] != nil {
			p.fail("approval.required", fields["required"].Line, "%d approvals need %d different people, but approvers and escalate_to have only %d", a.Required, a.Required, people)
		}
	}
	// Without approvers the eligible people are every approver and admin, whom the tools
	// file cannot count: a required larger than the staff leaves actions to expire.
	if fields["escalate_to"] != nil && fields["approvers"] == nil {
		p.fail("approval.escalate_to", fields["escalate_to"].Line, "without approvers every approver and admin may decide already; name the approvers that escalation widens")
	}
	escalates := fields["escalate_to"] != nil || fields["escalate_notify"] != nil
	switch {
	case escalates && a.EscalateAfter == 0 && fields["escalate_after"] == nil:
		line := n.Line
		if f := fields["escalate_to"]; f != nil {
			line = f.Line
		} else if f := fields["escalate_notify"]; f != nil {
			line = f.Line
		}
		p.fail("approval.escalate_after", line, "escalate_to and escalate_notify need escalate_after: when to escalate")
	case !escalates && fields["escalate_after"] != nil:
		p.fail("approval.escalate_after", fields["escalate_after"].Line, "escalation needs escalate_to or escalate_notify: whom it widens to or tells")
	}
	if len(p.errs) > 0 {
		return nil
	}
	return a
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none are defined"
	}
	return strings.Join(names, ", ")
}

// secret reads a signing secret: a string, with ${VAR} expanded from the environment (the
// way to write one, so that the file itself holds none). A "whsec_" secret must be base64
// after the prefix, as Standard Webhooks say.
func (p *toolParser) secret(fields map[string]*yaml.Node, field string) string {
	key := field[strings.LastIndexByte(field, '.')+1:]
	n := fields[key]
	var raw string
	if !p.scalarAt(fields, key, field, &raw) || raw == "" {
		p.fail(field, n.Line, "must be a non-empty string, such as \"${OPS_EVENTS_SECRET}\"")
		return ""
	}
	lookup := p.opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	s, err := ExpandEnv(raw, lookup)
	if err != nil {
		p.fail(field, n.Line, "%v", err)
		return ""
	}
	if s == "" {
		p.fail(field, n.Line, "is empty once expanded")
		return ""
	}
	if _, err := signingKey(s); err != nil {
		p.fail(field, n.Line, "%v", err)
	}
	return s
}

// signingKey is the HMAC key a secret stands for, as Standard Webhooks read it: the base64
// after "whsec_", or else the secret's bytes.
func signingKey(secret string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		k, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return nil, errors.New(`a "whsec_" secret must be base64 after the prefix`)
		}
		return k, nil
	}
	return []byte(secret), nil
}

// checkSigningKeys refuses a webhook channel whose secret signs as APPROVALS_WEBHOOK_SECRET
// or as an executor's own secret does: every receiver of events would hold a key that signs
// executions, and could forge a delivery to the mail or payment receiver.
func (r *Registry) checkSigningKeys(opts Options) []error {
	type signer struct{ who, key string }
	var execs []signer
	if opts.WebhookSecret != "" {
		if k, err := signingKey(opts.WebhookSecret); err == nil {
			execs = append(execs, signer{webhookSecretVariable, string(k)})
		}
	}
	for _, name := range r.names {
		if e := r.tools[name].Executor; e != nil && e.Secret != "" {
			if k, err := signingKey(e.Secret); err == nil {
				execs = append(execs, signer{fmt.Sprintf("the executor secret of tool %q", name), string(k)})
			}
		}
	}
	var errs []error
	for _, cname := range slices.Sorted(maps.Keys(r.channels)) {
		c := r.channels[cname]
		if c.Secret == "" {
			continue
		}
		k, err := signingKey(c.Secret)
		if err != nil {
			continue
		}
		for _, e := range execs {
			if string(k) == e.key {
				errs = append(errs, fmt.Errorf("channel %q, field %q: signs as %s does; give the channel a secret of its own, or a receiver of its events could forge executions", cname, "secret", e.who))
			}
		}
	}
	return errs
}

// Package email tells approvers of actions by mail over SMTP: the email notification channel
// (a queue.Channel, which maintenance.ChannelNotifier drives).
// A message informs and links to the action page; it decides nothing, since a decision needs
// a signed-in session.
package email

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/approvals/approvals/queue"
)

// Server is where and how to send: APPROVALS_SMTP_URL parsed.
type Server struct {
	Host        string
	Port        int
	Username    string // empty: no AUTH
	Password    string
	ImplicitTLS bool // smtps://: TLS from the first byte; smtp:// upgrades with STARTTLS when offered
}

// Default ports: submission (587) for smtp://, submissions (465) for smtps://.
const (
	defaultPort    = 587
	defaultTLSPort = 465
)

// ParseURL parses APPROVALS_SMTP_URL: smtp://user:pass@host:port or smtps://…. Its errors
// name what is wrong and never repeat the password.
func ParseURL(raw string) (Server, error) {
	if strings.TrimSpace(raw) == "" {
		return Server{}, errors.New("APPROVALS_SMTP_URL is empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error quotes the whole URL, password and all.
		return Server{}, errors.New("APPROVALS_SMTP_URL does not parse as a URL (want smtp://user:pass@host:port)")
	}
	var s Server
	switch u.Scheme {
	case "smtp":
	case "smtps":
		s.ImplicitTLS = true
	default:
		return Server{}, fmt.Errorf("APPROVALS_SMTP_URL scheme %q: use smtp:// (STARTTLS when offered) or smtps:// (implicit TLS)", u.Scheme)
	}
	s.Host = u.Hostname()
	if s.Host == "" {
		return Server{}, errors.New("APPROVALS_SMTP_URL has no host")
	}
	switch p := u.Port(); {
	case p == "" && s.ImplicitTLS:
		s.Port = defaultTLSPort
	case p == "":
		s.Port = defaultPort
	default:
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Server{}, fmt.Errorf("APPROVALS_SMTP_URL port %q is not a number from 1 to 65535", p)
		}
		s.Port = n
	}
	if u.Path != "" && u.Path != "/" {
		return Server{}, fmt.Errorf("APPROVALS_SMTP_URL has a path %q; want only smtp://user:pass@host:port", u.Path)
	}
	if u.User != nil {
		s.Username = u.User.Username()
		s.Password, _ = u.User.Password()
		if s.Username == "" {
			return Server{}, errors.New("APPROVALS_SMTP_URL has a password but no user name")
		}
	}
	return s, nil
}

// String names the server for logs, without the password.
func (s Server) String() string {
	scheme := "smtp"
	if s.ImplicitTLS {
		scheme = "smtps"
	}
	who := ""
	if s.Username != "" {
		who = s.Username + "@"
	}
	return scheme + "://" + who + net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
}

// Config sets up a Notifier.
type Config struct {
	Server    Server
	From      string // APPROVALS_SMTP_FROM, an address ("Approvals <approvals@example.com>" works too)
	PublicURL string // APPROVALS_PUBLIC_URL, the base of the action link
	Timeout   time.Duration
	// TLSConfig overrides the TLS settings (tests trust their own CA); nil means the system
	// roots and Server.Host as the name to verify.
	TLSConfig *tls.Config
	// Now is the clock of the Date header; nil means time.Now.
	Now func() time.Time
}

// Notifier mails notifications to the channel's addresses.
type Notifier struct {
	cfg    Config
	from   *mail.Address
	domain string // of From: the right-hand side of every Message-ID
}

// New checks cfg and returns a Notifier.
func New(cfg Config) (*Notifier, error) {
	if cfg.Server.Host == "" {
		return nil, errors.New("email channel: APPROVALS_SMTP_URL is not set")
	}
	if cfg.From == "" {
		return nil, errors.New("email channel: APPROVALS_SMTP_FROM is not set")
	}
	from, err := mail.ParseAddress(cfg.From)
	if err != nil {
		return nil, fmt.Errorf("APPROVALS_SMTP_FROM %q is not an email address: %v", cfg.From, err)
	}
	if cfg.PublicURL == "" {
		return nil, errors.New("email channel: APPROVALS_PUBLIC_URL is not set")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	domain := from.Address[strings.LastIndexByte(from.Address, '@')+1:]
	return &Notifier{cfg: cfg, from: from, domain: domain}, nil
}

// MessageID returns the Message-ID (without angle brackets) of notification id: the same on
// every retry, so a mail client shows a repeated delivery once.
func (e *Notifier) MessageID(notificationID string) string {
	return "notification-" + notificationID + "@" + e.domain
}

// threadID is what every message about one action refers to, so mail clients thread them.
func (e *Notifier) threadID(actionID string) string {
	return "action-" + actionID + "@" + e.domain
}

// Render builds the message for n (the email channel's queue.Channel message).
func (e *Notifier) Render(n queue.Notification) (*gomail.Msg, error) { return e.Message(n) }

// Send sends m, one message for n, to every address of n.Channel.Email. The server
// accepting the message for every recipient is delivery; a refused recipient, a refused
// message or an unreachable server is an error for the outbox to retry. A sent mail is not
// recorded: it cannot be changed later.
func (e *Notifier) Send(ctx context.Context, n queue.Notification, m *gomail.Msg) (queue.Sent, error) {
	if n.Channel.Email == nil || len(n.Channel.Email.To) == 0 {
		return queue.Sent{}, fmt.Errorf("email channel %q: no addresses", n.Channel.Name)
	}
	c, err := e.client()
	if err != nil {
		return queue.Sent{}, fmt.Errorf("email via %s: %w", e.cfg.Server, err)
	}
	if err := c.DialAndSendWithContext(ctx, m); err != nil {
		return queue.Sent{}, fmt.Errorf("email %s via %s: %w", n.ID, e.cfg.Server, err)
	}
	return queue.Sent{}, nil
}

// Update tells of a decision as mail can: a new message, in the action's thread.
func (e *Notifier) Update(ctx context.Context, n queue.Notification, _ []queue.ChannelMessage, m *gomail.Msg) (queue.Sent, error) {
	return e.Send(ctx, n, m)
}

// Message builds the message for n without sending it.
func (e *Notifier) Message(n queue.Notification) (*gomail.Msg, error) {
	if n.Action == nil && n.Plan == nil {
		return nil, fmt.Errorf("notification %s: no action", n.ID)
	}
	if n.Channel.Email == nil || len(n.Channel.Email.To) == 0 {
		return nil, fmt.Errorf("email channel %q: no addresses", n.Channel.Name)
	}
	c, thread := content{}, ""
	if n.Plan != nil {
		c, thread = e.planContent(n), "<plan-"+n.Plan.ID+"@"+e.domain+">"
	} else {
		c, thread = e.content(n), "<"+e.threadID(n.Action.ID)+">"
	}
	m := gomail.NewMsg()
	m.FromMailAddress(e.from)
	if err := m.To(n.Channel.Email.To...); err != nil {
		return nil, fmt.Errorf("email channel %q: %w", n.Channel.Name, err)
	}
	m.Subject(c.Subject)
	m.SetMessageIDWithValue(e.MessageID(n.ID))
	m.SetGenHeader(gomail.HeaderInReplyTo, thread)
	m.SetGenHeader(gomail.HeaderReferences, thread)
	// Mark it machine-sent so that out-of-office replies are not sent back to us.
	m.SetGenHeader(gomail.Header("Auto-Submitted"), "auto-generated")
	m.SetGenHeader(gomail.HeaderXAutoResponseSuppress, "All")
	m.SetDateWithValue(e.cfg.Now())
	m.SetBodyString(gomail.TypeTextPlain, c.Text)
	m.AddAlternativeString(gomail.TypeTextHTML, c.HTML)
	return m, nil
}

func (e *Notifier) client() (*gomail.Client, error) {
	s := e.cfg.Server
	opts := []gomail.Option{gomail.WithPort(s.Port), gomail.WithTimeout(e.cfg.Timeout)}
	tc := e.cfg.TLSConfig
	if tc == nil {
		tc = &tls.Config{ServerName: s.Host, MinVersion: tls.VersionTLS12}
	}
	opts = append(opts, gomail.WithTLSConfig(tc))
	if s.ImplicitTLS {
		opts = append(opts, gomail.WithSSL())
	} else {
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSOpportunistic))
	}
	if s.Username != "" {
		// PLAIN where offered, LOGIN for servers that offer only that (Microsoft 365). Both
		// refuse to send the password over a connection that is neither TLS nor to localhost,
		// so an opportunistic smtp:// never leaks it to a server that did not offer STARTTLS.
		opts = append(opts, gomail.WithOpportunisticSMTPAuth(gomail.SMTPAuthPlain, gomail.SMTPAuthLogin),
			gomail.WithUsername(s.Username), gomail.WithPassword(s.Password))
	}
	return gomail.NewClient(s.Host, opts...)
}

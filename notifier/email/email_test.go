package email_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/notifier/email"
	"github.com/approvals/approvals/queue"
)

// mailServer is a real SMTP server (emersion/go-smtp) that requires AUTH PLAIN as
// user/secret, can be told to refuse a recipient or the message, and keeps what it accepted.
type mailServer struct {
	srv        *smtp.Server
	addr       *net.TCPAddr
	refuseRcpt string // a recipient to refuse with 550
	refuseData bool   // refuse every message with 554

	mu   sync.Mutex
	msgs []delivered
}

type delivered struct {
	user string
	from string
	to   []string
	tls  bool
	data []byte
}

type session struct {
	s    *mailServer
	tls  bool
	user string
	from string
	to   []string
}

func (se *session) AuthMechanisms() []string { return []string{sasl.Plain} }
func (se *session) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, username, password string) error {
		if username != "user" || password != "p@ss word" {
			return errors.New("invalid credentials")
		}
		se.user = username
		return nil
	}), nil
}
func (se *session) Mail(from string, _ *smtp.MailOptions) error {
	if se.user == "" {
		return smtp.ErrAuthRequired
	}
	se.from = from
	return nil
}
func (se *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if to == se.s.refuseRcpt {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
	}
	se.to = append(se.to, to)
	return nil
}
func (se *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if se.s.refuseData {
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "message refused"}
	}
	se.s.mu.Lock()
	se.s.msgs = append(se.s.msgs, delivered{user: se.user, from: se.from, to: se.to, tls: se.tls, data: b})
	se.s.mu.Unlock()
	return nil
}
func (se *session) Reset()        { se.from, se.to = "", nil }
func (se *session) Logout() error { return nil }

// startMailServer starts a server on 127.0.0.1. With tlsConf it offers STARTTLS, or with
// implicit it speaks TLS from the first byte.
func startMailServer(t *testing.T, tlsConf *tls.Config, implicit bool) *mailServer {
	t.Helper()
	m := &mailServer{}
	m.srv = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		_, isTLS := c.TLSConnectionState()
		return &session{s: m, tls: isTLS}, nil
	}))
	m.srv.Domain = "localhost"
	m.srv.AllowInsecureAuth = true
	m.srv.ReadTimeout = 10 * time.Second
	m.srv.WriteTimeout = 10 * time.Second
	var l net.Listener
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if tlsConf != nil {
		if implicit {
			l = tls.NewListener(l, tlsConf)
		} else {
			m.srv.TLSConfig = tlsConf
		}
	}
	m.addr = l.Addr().(*net.TCPAddr)
	go func() { _ = m.srv.Serve(l) }()
	t.Cleanup(func() { _ = m.srv.Close() })
	return m
}

func (m *mailServer) delivered() []delivered {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]delivered(nil), m.msgs...)
}

// testTLS borrows httptest's certificate for 127.0.0.1: the server side, and a client side
// that trusts it.
func testTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	ts := httptest.NewUnstartedServer(http.NotFoundHandler())
	ts.StartTLS()
	t.Cleanup(ts.Close)
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	return ts.TLS.Clone(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

func notifierFor(t *testing.T, m *mailServer, scheme string, clientTLS *tls.Config) *email.Notifier {
	t.Helper()
	server, err := email.ParseURL(scheme + "://user:p%40ss%20word@127.0.0.1:" + strconv.Itoa(m.addr.Port))
	if err != nil {
		t.Fatal(err)
	}
	n, err := email.New(email.Config{
		Server: server, From: "Approvals <approvals@example.com>", PublicURL: "https://approvals.example.com/",
		Timeout: 5 * time.Second, TLSConfig: clientTLS,
		Now: func() time.Time { return time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func pendingNotification() queue.Notification {
	expires := time.Date(2026, 3, 5, 5, 0, 0, 0, time.UTC)
	return queue.Notification{
		ID: "0190n-1", Type: classify.EventActionPending,
		Channel: classify.Channel{Name: "leads-mail", Email: &classify.EmailChannel{To: []string{"leads@example.com", "ann@example.com"}}},
		Action: &queue.Action{
			ID: "0190a-7", Tool: "send_customer_email", Class: classify.AtMostOnce, IntentKey: "refund:42", Attempt: 1,
			State:       queue.StatePending,
			Payload:     json.RawMessage(`{"to":"c@example.com","subject":"Refund <b>now</b> & later","body":"Dear customer,\nyour refund is on its way."}`),
			RequestedBy: "agent:support-bot", CreatedAt: time.Date(2026, 3, 4, 4, 59, 0, 0, time.UTC), ExpiresAt: &expires,
			Spec: classify.Tool{Name: "send_customer_email", Preview: map[string]string{"title": "{subject}", "to": "{to}", "body": "{body}"}},
		},
		OccurredAt: time.Date(2026, 3, 4, 4, 59, 0, 0, time.UTC), Attempt: 1,
	}
}

// parsed is one received message: its headers and its decoded text and HTML parts.
type parsed struct {
	header mail.Header
	text   string
	html   string
}

func parse(t *testing.T, data []byte) parsed {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not a mail message: %v\n%s", err, data)
	}
	p := parsed{header: msg.Header}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("Content-Type %q, want multipart/alternative", msg.Header.Get("Content-Type"))
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var body io.Reader = part
		if part.Header.Get("Content-Transfer-Encoding") == "quoted-printable" {
			body = quotedprintable.NewReader(part)
		}
		b, _ := io.ReadAll(body)
		b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
		ct, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		switch ct {
		case "text/plain":
			p.text = string(b)
		case "text/html":
			p.html = string(b)
		}
	}
	return p
}

// A pending action is mailed once to all the channel's addresses, after AUTH PLAIN with the
// URL's user and password, with the subject, body and link docs/channels.md names ("Email channel").
func TestNotifySendsMessage(t *testing.T) {
	t.Parallel()
	m := startMailServer(t, nil, false)
	n := notifierFor(t, m, "smtp", nil)
	notif := pendingNotification()
	if err := send(n, notif); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	got := m.delivered()
	if len(got) != 1 {
		t.Fatalf("server accepted %d messages, want 1", len(got))
	}
	d := got[0]
	if d.user != "user" || d.from != "approvals@example.com" || strings.Join(d.to, ",") != "leads@example.com,ann@example.com" {
		t.Fatalf("envelope user=%q from=%q to=%v", d.user, d.from, d.to)
	}
	p := parse(t, d.data)
	subject, err := new(mime.WordDecoder).DecodeHeader(p.header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "[approvals] Approval needed: send_customer_email: Refund <b>now</b> & later"; subject != want {
		t.Fatalf("Subject %q, want %q", subject, want)
	}
	if got, want := p.header.Get("Message-Id"), "<notification-0190n-1@example.com>"; got != want {
		t.Fatalf("Message-ID %q, want %q", got, want)
	}
	if got := p.header.Get("References"); got != "<action-0190a-7@example.com>" {
		t.Fatalf("References %q", got)
	}
	if got := p.header.Get("Auto-Submitted"); got != "auto-generated" {
		t.Fatalf("Auto-Submitted %q", got)
	}
	for _, want := range []string{
		"Refund <b>now</b> & later",
		"to: c@example.com",
		"body: Dear customer,\nyour refund is on its way.",
		"Intent key: refund:42",
		"Asked by:   agent:support-bot",
		"Expires:    2026-03-05 05:00 UTC",
		"https://approvals.example.com/actions/0190a-7",
		"This message decides nothing",
	} {
		if !strings.Contains(p.text, want) {
			t.Errorf("text body lacks %q:\n%s", want, p.text)
		}
	}
	for _, want := range []string{
		"Refund &lt;b&gt;now&lt;/b&gt; &amp; later",
		`<a href="https://approvals.example.com/actions/0190a-7">`,
		"refund:42",
	} {
		if !strings.Contains(p.html, want) {
			t.Errorf("HTML part lacks %q:\n%s", want, p.html)
		}
	}
	if strings.Contains(p.html, "<b>now</b>") {
		t.Errorf("HTML part does not escape the payload:\n%s", p.html)
	}
}

// A retry of one notification has the same Message-ID; another notification of the same
// action has another one but the same thread.
func TestMessageIDStableAcrossRetries(t *testing.T) {
	t.Parallel()
	m := startMailServer(t, nil, false)
	n := notifierFor(t, m, "smtp", nil)
	first := pendingNotification()
	retry := first
	retry.Attempt = 2
	reminder := first
	reminder.ID, reminder.Type = "0190n-2", classify.EventActionReminder
	for _, notif := range []queue.Notification{first, retry, reminder} {
		if err := send(n, notif); err != nil {
			t.Fatal(err)
		}
	}
	got := m.delivered()
	if len(got) != 3 {
		t.Fatalf("server accepted %d messages, want 3", len(got))
	}
	ids := make([]string, 3)
	for i, d := range got {
		ids[i] = parse(t, d.data).header.Get("Message-Id")
	}
	if ids[0] != ids[1] {
		t.Fatalf("a retry changed the Message-ID: %q then %q", ids[0], ids[1])
	}
	if ids[2] == ids[0] {
		t.Fatalf("another notification reused Message-ID %q", ids[0])
	}
}

// The subject names the decision and who made it.
func TestSubjectNamesEvent(t *testing.T) {
	t.Parallel()
	n, err := email.New(email.Config{Server: email.Server{Host: "mail.invalid", Port: 25}, From: "approvals@example.com", PublicURL: "https://a.example"})
	if err != nil {
		t.Fatal(err)
	}
	by, note := "user:ann@example.com", "fine"
	for _, tc := range []struct {
		event, want string
	}{
		{classify.EventActionPending, "[approvals] Approval needed: send_customer_email: Refund <b>now</b> & later"},
		{classify.EventActionReminder, "[approvals] Reminder: approval needed: send_customer_email: Refund <b>now</b> & later"},
		{classify.EventActionApproved, "[approvals] Approved by ann@example.com: send_customer_email: Refund <b>now</b> & later"},
		{classify.EventActionExpired, "[approvals] Expired: send_customer_email: Refund <b>now</b> & later"},
	} {
		notif := pendingNotification()
		notif.Type = tc.event
		if tc.event == classify.EventActionApproved {
			notif.Action.State, notif.Action.DecidedBy, notif.Action.DecisionNote = queue.StateApproved, &by, &note
		}
		msg, err := n.Message(notif)
		if err != nil {
			t.Fatal(err)
		}
		if got := msg.GetGenHeader("Subject"); len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: Subject %q, want %q", tc.event, got, tc.want)
		}
	}
}

// STARTTLS is used when the server offers it, and smtps:// speaks TLS from the start; the
// password then travels encrypted.
func TestTLS(t *testing.T) {
	t.Parallel()
	serverTLS, clientTLS := testTLS(t)
	for _, tc := range []struct {
		scheme   string
		implicit bool
	}{{"smtp", false}, {"smtps", true}} {
		t.Run(tc.scheme, func(t *testing.T) {
			t.Parallel()
			m := startMailServer(t, serverTLS, tc.implicit)
			if err := send(notifierFor(t, m, tc.scheme, clientTLS), pendingNotification()); err != nil {
				t.Fatalf("Notify: %v", err)
			}
			got := m.delivered()
			if len(got) != 1 || !got[0].tls || got[0].user != "user" {
				t.Fatalf("delivered %d messages (first: tls=%v user=%q), want one over TLS after AUTH", len(got), len(got) > 0 && got[0].tls, func() string {
					if len(got) == 0 {
						return ""
					}
					return got[0].user
				}())
			}
		})
	}
}

// A refused recipient, a refused message, wrong credentials and a server that is down are
// errors for the outbox to retry.
func TestNotifyFailures(t *testing.T) {
	t.Parallel()
	// Port 1 (tcpmux, privileged, served by nobody here): a connection is
	// refused. A port just listened on and closed was not safe: a parallel
	// test's TLS server could be given it again, and the dial then failed
	// with EOF instead.
	down := &mailServer{addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}}
	for _, tc := range []struct {
		name  string
		setup func(*mailServer)
		srv   *mailServer
		want  string
	}{
		{name: "refused recipient", setup: func(m *mailServer) { m.refuseRcpt = "ann@example.com" }, want: "no such user"},
		{name: "refused data", setup: func(m *mailServer) { m.refuseData = true }, want: "message refused"},
		{name: "down", srv: down, want: "connect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := tc.srv
			if m == nil {
				m = startMailServer(t, nil, false)
				tc.setup(m)
			}
			err := send(notifierFor(t, m, "smtp", nil), pendingNotification())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "p@ss") {
				t.Fatalf("error shows the password: %v", err)
			}
			if n := len(m.delivered()); n != 0 {
				t.Fatalf("server kept %d messages", n)
			}
		})
	}
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    email.Server
		wantErr string
	}{
		{in: "smtp://u:p@mail.example.com:2525", want: email.Server{Host: "mail.example.com", Port: 2525, Username: "u", Password: "p"}},
		{in: "smtp://mail.example.com", want: email.Server{Host: "mail.example.com", Port: 587}},
		{in: "smtps://u:p%2Fq@mail.example.com", want: email.Server{Host: "mail.example.com", Port: 465, Username: "u", Password: "p/q", ImplicitTLS: true}},
		{in: "smtp://[::1]:25", want: email.Server{Host: "::1", Port: 25}},
		{in: "", wantErr: "empty"},
		{in: "http://u:hunter2@mail.example.com", wantErr: `scheme "http"`},
		{in: "smtp://u:hunter2@:25", wantErr: "no host"},
		{in: "smtp://u:hunter2@mail.example.com:99999", wantErr: `port "99999"`},
		{in: "smtp://u:hunter2@mail.example.com/x", wantErr: "path"},
		{in: "smtp://:hunter2@mail.example.com", wantErr: "no user name"},
		{in: "smtp://u:hunter2@mail.example.com:%zz", wantErr: "does not parse"},
	} {
		got, err := email.ParseURL(tc.in)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("ParseURL(%q): %v", tc.in, err)
		case tc.wantErr == "" && got != tc.want:
			t.Errorf("ParseURL(%q) = %+v, want %+v", tc.in, got, tc.want)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("ParseURL(%q) error %v, want one containing %q", tc.in, err, tc.wantErr)
		case err != nil && strings.Contains(err.Error(), "hunter2"):
			t.Errorf("ParseURL(%q) error shows the password: %v", tc.in, err)
		}
	}
}

// send renders n and sends it, as the outbox does for an email channel.
func send(e *email.Notifier, n queue.Notification) error {
	m, err := e.Render(n)
	if err != nil {
		return err
	}
	_, err = e.Send(context.Background(), n, m)
	return err
}

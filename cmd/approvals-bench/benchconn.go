package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// benchClient is one load-generating client: a single keep-alive HTTP/1.1
// connection used by one goroutine. It speaks just enough HTTP for
// approvals' API (Content-Length or chunked bodies, no redirects followed),
// because the load generator shares the machine's cores with the server and
// PostgreSQL: net/http's client spent about as much CPU per request as
// pgbench spends per transaction, which the ratios would then charge to
// approvals.
type benchClient struct {
	addr, host    string
	prefix        string // the URL's path, before every request path
	token, cookie string
	conn          net.Conn
	r             *bufio.Reader
	w             *bufio.Writer
	body          []byte // the last response body, reused
}

func newBenchClient(cfg benchConfig) (*benchClient, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("bench speaks plain HTTP to a local server; --url %s is %s", cfg.URL, u.Scheme)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	return &benchClient{addr: addr, host: u.Host, prefix: strings.TrimSuffix(u.EscapedPath(), "/"),
		token: cfg.Token, cookie: cfg.Cookie}, nil
}

func (c *benchClient) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}

// do sends one request and returns the status and body, or an error for a
// transport failure. The body is valid until the next call.
func (c *benchClient) do(ctx context.Context, method, path string, body []byte, key string) (int, []byte, error) {
	status, b, err := c.roundTrip(ctx, method, path, body, key)
	if err != nil {
		c.close()
	}
	return status, b, err
}

func (c *benchClient) roundTrip(ctx context.Context, method, path string, body []byte, key string) (int, []byte, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	deadline := time.Now().Add(benchRequestTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if c.conn == nil {
		conn, err := net.DialTimeout("tcp", c.addr, time.Until(deadline))
		if err != nil {
			return 0, nil, err
		}
		c.conn = conn
		c.r = bufio.NewReaderSize(conn, 16<<10)
		c.w = bufio.NewWriterSize(conn, 16<<10)
	}
	conn := c.conn
	if err := conn.SetDeadline(deadline); err != nil {
		return 0, nil, err
	}
	// Stop waiting when the run is cancelled (on this connection: c.conn
	// may be cleared meanwhile).
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	w := c.w
	w.WriteString(method)
	w.WriteByte(' ')
	w.WriteString(c.prefix)
	w.WriteString(path)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(c.host)
	w.WriteString("\r\nUser-Agent: approvals-bench\r\n")
	if c.token != "" {
		w.WriteString("Authorization: Bearer ")
		w.WriteString(c.token)
		w.WriteString("\r\n")
	}
	if c.cookie != "" {
		w.WriteString("Cookie: ")
		w.WriteString(c.cookie)
		w.WriteString("\r\n")
	}
	if key != "" {
		w.WriteString("Idempotency-Key: ")
		w.WriteString(key)
		w.WriteString("\r\n")
	}
	if body != nil {
		w.WriteString("Content-Type: application/json\r\nContent-Length: ")
		w.WriteString(strconv.Itoa(len(body)))
		w.WriteString("\r\n")
	}
	w.WriteString("\r\n")
	w.Write(body)
	if err := w.Flush(); err != nil {
		return 0, nil, err
	}
	return c.readResponse(method)
}

func (c *benchClient) readResponse(method string) (int, []byte, error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, nil, err
	}
	// "HTTP/1.1 201 Created\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, nil, fmt.Errorf("malformed status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, fmt.Errorf("malformed status line %q", line)
	}
	length, chunked, closing := -1, false, false
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, nil, fmt.Errorf("malformed header %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, nil, fmt.Errorf("malformed Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = strings.EqualFold(string(value), "chunked")
		case bytes.EqualFold(name, []byte("Connection")):
			closing = strings.EqualFold(string(value), "close")
		}
	}
	c.body = c.body[:0]
	switch {
	case method == "HEAD" || status == 204 || status == 304 || (status >= 100 && status < 200):
	case chunked:
		var buf bytes.Buffer
		if _, err := io.Copy(&buf, httputil.NewChunkedReader(c.r)); err != nil {
			return 0, nil, err
		}
		// The chunked reader stops at the last chunk; a trailer section
		// (none from approvals) ends with an empty line.
		for {
			line, err := c.r.ReadSlice('\n')
			if err != nil {
				return 0, nil, err
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				break
			}
		}
		c.body = append(c.body, buf.Bytes()...)
	case length >= 0:
		if cap(c.body) < length {
			c.body = make([]byte, length)
		}
		c.body = c.body[:length]
		if _, err := io.ReadFull(c.r, c.body); err != nil {
			return 0, nil, err
		}
	default:
		return 0, nil, errors.New("response has neither Content-Length nor chunked encoding")
	}
	if closing {
		c.close()
	}
	return status, c.body, nil
}

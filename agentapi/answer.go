package agentapi

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Answer is an HTTP answer built in memory by the writers the faces share
// (problem.Write, the action's JSON), sent once the face decides to: a
// detached long-poll writes it to its connection itself (handlers), and
// the MCP endpoint holds a cached token's answer until the token is known
// valid (mcpserver). The zero value is not ready: use NewAnswer.
type Answer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

// NewAnswer returns an empty answer with header (a new one when nil).
func NewAnswer(header http.Header) *Answer {
	if header == nil {
		header = make(http.Header)
	}
	return &Answer{header: header}
}

func (a *Answer) Header() http.Header { return a.header }

// WriteHeader keeps the first status written.
func (a *Answer) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

func (a *Answer) Write(b []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	return a.body.Write(b)
}

// Body is where the answer's body is written.
func (a *Answer) Body() *bytes.Buffer { return &a.body }

// Send writes the answer to w.
func (a *Answer) Send(w http.ResponseWriter) {
	for k, v := range a.header {
		w.Header()[k] = v
	}
	a.WriteHeader(http.StatusOK)
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body.Bytes())
}

// WriteResponse writes the answer to conn as a whole HTTP/1.1 response
// that closes the connection.
func (a *Answer) WriteResponse(conn io.Writer) error {
	a.WriteHeader(http.StatusOK)
	a.header.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	a.header.Set("Content-Length", strconv.Itoa(a.body.Len()))
	resp := http.Response{StatusCode: a.status, ProtoMajor: 1, ProtoMinor: 1, Header: a.header,
		ContentLength: int64(a.body.Len()), Body: io.NopCloser(&a.body), Close: true}
	return resp.Write(conn)
}

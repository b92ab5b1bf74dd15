package mcpserver

import (
	"context"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/agentapi"
	"github.com/approvals/approvals/problem"
	"github.com/approvals/approvals/queue"
)

// A caller is the agent behind one HTTP request to /mcp, and how far its
// token has been checked. A token seen valid before is taken from the
// token cache without a query, as REST's hot path does (handlers.API.HotAuth):
// then the statement that acts checks it (a submission, or a drive call's
// transition: queue.Store.SupportsTokenGuard), and every other method is
// preceded by a lookup (tokenCheck). Whatever no statement checked is looked
// up before the answer leaves (authenticate), so a revoked token gets 401,
// never another answer, and never a side effect.
type caller struct {
	name  string
	hash  string
	accts accounts.Store

	mu      sync.Mutex
	checked bool  // the token was looked up, or a statement checked it
	refused error // why the token was refused, if it was
}

// guard is the hash a statement must check, or "" once the token was checked.
func (c *caller) guard() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.checked || c.refused != nil {
		return ""
	}
	return c.hash
}

// verify looks the token up unless that was done already.
func (c *caller) verify(ctx context.Context) error {
	if c.guard() == "" {
		return c.refusal()
	}
	_, err := accounts.AgentByHash(ctx, c.accts, c.hash)
	c.record(err)
	return err
}

// settle records what a guarded statement said of the token: it was
// checked when the call succeeded, refused when the statement refused it.
// Any other error may have come before the statement, which leaves the
// token to the lookup before the answer.
func (c *caller) settle(guard string, err error) {
	if guard != "" {
		c.record(err)
	}
}

// record notes what a check of the token said: valid (no error), refused,
// or nothing known (another error).
func (c *caller) record(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
		c.checked = true
	case queue.ErrorCode(err) == queue.CodeUnauthorized:
		c.refused = err
	}
}

func (c *caller) refusal() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

type callerKey struct{}

// callerKeyName carries the caller through the SDK, in TokenInfo.Extra.
const callerKeyName = "approvals.caller"

// callerOf returns the caller of a request the SDK received.
func callerOf(req mcp.Request) *caller {
	extra := req.GetExtra()
	if extra == nil || extra.TokenInfo == nil {
		return nil
	}
	c, _ := extra.TokenInfo.Extra[callerKeyName].(*caller)
	return c
}

// authenticate answers 401 (problem details, like the REST API) unless the
// request carries a valid, unrevoked agent token, and passes the caller on
// in the request context. A token taken from the cache is checked during
// the request (see caller); its answer is held back until the token is
// known to be valid, and replaced by 401 if it was not.
func (s *server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hash, err := accounts.BearerHash(r)
		if err != nil {
			s.problem(w, r, err, "token lookup")
			return
		}
		ca := &caller{hash: hash, accts: s.accts}
		cached := false
		if s.store.SupportsTokenGuard() {
			ca.name, cached = s.tokens.Get(hash)
		}
		if !cached {
			if ca.name, err = accounts.AgentByHash(r.Context(), s.accts, hash); err != nil {
				s.problem(w, r, err, "token lookup")
				return
			}
			ca.checked = true
			if s.store.SupportsTokenGuard() {
				s.tokens.Put(hash, ca.name)
			}
		}
		// The endpoint reads no query parameter; one it does not know is
		// refused, never ignored (after the token, as REST does).
		if err := agentapi.CheckQuery(r.URL.RawQuery); err != nil {
			if verr := ca.verify(r.Context()); verr != nil {
				s.tokens.Remove(hash)
				s.problem(w, r, verr, "token lookup")
				return
			}
			s.problem(w, r, err, "query")
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), callerKey{}, ca))
		if !cached {
			next.ServeHTTP(w, r)
			return
		}
		// The endpoint answers JSON (StreamableHTTPOptions.JSONResponse),
		// written once at the end, so nothing is lost by holding it.
		held := agentapi.NewAnswer(nil)
		next.ServeHTTP(held, r)
		if err := ca.verify(r.Context()); err != nil {
			s.tokens.Remove(hash)
			if r.Context().Err() != nil && ca.refusal() == nil {
				return // the client left; nobody reads an answer
			}
			s.problem(w, r, err, "token lookup")
			return
		}
		held.Send(w)
	})
}

// problem answers err as problem details, outside MCP.
func (s *server) problem(w http.ResponseWriter, r *http.Request, err error, step string) {
	_ = problem.Write(w, queue.ErrorOf(r.Context(), err, s.store, s.log, "face", "mcp", "step", step))
}

// verifyAgent hands the caller found by authenticate to the SDK.
func verifyAgent(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
	ca, ok := r.Context().Value(callerKey{}).(*caller)
	if !ok || ca.name == "" {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: ca.name, Extra: map[string]any{callerKeyName: ca}}, nil
}

// tokenCheck looks a cached token up before every method except a call of
// a tool whose statement checks it (guarded): reading the tools, a read
// tool's call, a notification.
func tokenCheck(guarded map[string]bool) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if ca := callerOf(req); ca != nil {
				if call, ok := req.(*mcp.CallToolRequest); !ok || !guarded[call.Params.Name] {
					if err := ca.verify(ctx); err != nil {
						return nil, err
					}
				}
			}
			return next(ctx, method, req)
		}
	}
}

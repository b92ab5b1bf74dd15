package mcpserver

import (
	"log/slog"
	"math"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/approvals/approvals/accounts"
	"github.com/approvals/approvals/classify"
	"github.com/approvals/approvals/longpoll"
	"github.com/approvals/approvals/queue"
)

// Channel is recorded on every event an MCP call causes, so staff can see
// in the timeline that an action came through MCP.
const Channel = "mcp"

// envelopeHeadroom is what an HTTP request to /mcp may carry beyond the
// arguments of its call: the JSON-RPC envelope (method, id, tool name,
// _meta).
const envelopeHeadroom = 64 << 10

// requestLimit caps one HTTP request to /mcp. The arguments of a single call
// are held to maxBody inside it, as a REST body is, so an oversized call (up
// to twice the limit) is an isError result (payload_too_large) the model can
// read, and only an absurd request is refused by the transport.
func requestLimit(maxBody int64) int64 {
	if maxBody > (math.MaxInt64-envelopeHeadroom)/2 {
		return math.MaxInt64
	}
	return 2*maxBody + envelopeHeadroom
}

// instructions are sent to the client at initialization; clients usually
// show them to the model once per session.
const instructions = "approvals guards side effects. Every tool here except the read and drive tools submits an action " +
	"keyed by an intent key that names the business fact (refund:{order_id}:{line_id}, not a request id). " +
	"Follow the guidance in each tool's description and in each result's text. If a call times out or fails, " +
	"do not retry it blindly: call find_actions with the intent key first, then act on what it says. " +
	"Follow an action with get_action (with wait) instead of calling its tool again."

type server struct {
	svc     *queue.Service
	polls   *longpoll.Polls
	store   queue.Reader
	accts   accounts.Store
	tokens  accounts.TokenCache // tokens seen valid (caller)
	log     *slog.Logger
	maxBody int64 // the most bytes of arguments a call may carry

	built   atomic.Pointer[built]
	buildMu sync.Mutex
}

// Config is what the MCP endpoint needs.
type Config struct {
	Service *queue.Service
	// Polls are the process's long-polls (get_action with wait).
	Polls *longpoll.Polls
	// Store is the service's own storage, read directly: whether it checks
	// agent tokens in its statements, whether it answers a ping.
	Store    queue.Reader
	Accounts accounts.Store
	// Logger, default slog.Default().
	Logger *slog.Logger
	// MaxBody is APPROVALS_MAX_BODY: a call's arguments may be as large as
	// a REST request body (<= 0 means 256 KiB).
	MaxBody int64
}

// New returns the handler for /mcp. The
// tools follow the service's registry, which changes only when upstream
// tools are re-imported. How requests are authenticated, and why the
// endpoint is stateless, is in doc.go.
func New(cfg Config) http.Handler {
	logger, maxBody := cfg.Logger, cfg.MaxBody
	if logger == nil {
		logger = slog.Default()
	}
	if maxBody <= 0 {
		maxBody = defaultMaxBody
	}
	s := &server{svc: cfg.Service, polls: cfg.Polls, store: cfg.Store, accts: cfg.Accounts, log: logger, maxBody: maxBody}
	h := mcp.NewStreamableHTTPHandler(s.current, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		Logger:       logger,
		// The SDK refuses requests that reach a loopback listener with another
		// Host header, against DNS rebinding of unauthenticated local servers.
		// Every request here needs a bearer token a browser never attaches on
		// its own, and approvals commonly listens on localhost behind a
		// reverse proxy that forwards the public Host, which the check would
		// refuse.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        requestLimit(maxBody),
	})
	// RequireBearerToken is how the SDK carries the caller into each call
	// (CallToolRequest.Extra.TokenInfo); authenticate found the caller just
	// before.
	verified := auth.RequireBearerToken(verifyAgent, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	return s.authenticate(verified)
}

// built is the MCP server of one registry.
type built struct {
	reg *classify.Registry
	ms  *mcp.Server
}

// current returns the MCP server of the service's current registry,
// building it when the registry changed (the MCP gateway re-imports an
// upstream's tools when it reconnects). The endpoint is stateless, so each
// request may use the newest one.
func (s *server) current(*http.Request) *mcp.Server {
	reg := s.svc.Registry()
	if b := s.built.Load(); b != nil && b.reg == reg {
		return b.ms
	}
	s.buildMu.Lock()
	defer s.buildMu.Unlock()
	if b := s.built.Load(); b != nil && b.reg == reg {
		return b.ms
	}
	ms := s.build(reg)
	s.built.Store(&built{reg: reg, ms: ms})
	return ms
}

func (s *server) build(reg *classify.Registry) *mcp.Server {
	ms := mcp.NewServer(&mcp.Implementation{Name: "approvals", Title: "approvals", Version: version()}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       s.log,
		// Tools only; a client reads the list anew on each session.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	guarded := make(map[string]bool)
	for _, t := range reg.Tools() {
		if classify.Reserved(t.Name) { // the tools file refuses these; never let one hide a read or drive tool
			s.log.Error("mcp: skipping a registered tool whose name is reserved", "tool", t.Name)
			continue
		}
		if strings.ContainsRune(t.Name, ':') {
			// MCP tool names have no ':'; such a tool (claude-code:Bash) is the
			// Claude Code hook's, submitted over REST.
			continue
		}
		ms.AddTool(guardedTool(t), s.submit(t.Name))
		guarded[t.Name] = true
	}
	s.addActionTools(ms, guarded)
	s.addPlanTools(ms)
	// Calls whose statement checks a cached token go straight on; every
	// other method looks it up first (caller).
	ms.AddReceivingMiddleware(tokenCheck(guarded))
	return ms
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// agentOf returns the agent behind one tool call.
func agentOf(req *mcp.CallToolRequest) (string, bool) {
	if req.Extra == nil || req.Extra.TokenInfo == nil || req.Extra.TokenInfo.UserID == "" {
		return "", false
	}
	return req.Extra.TokenInfo.UserID, true
}

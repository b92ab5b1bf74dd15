// Package mcpserver serves the Model Context Protocol endpoint /mcp for
// agents: a second face of the agent REST API, over Streamable HTTP with
// the official Go SDK. Every guarded tool of the registry becomes an MCP tool
// of the same name whose call submits an action through queue.Service, and
// the read and drive tools (get_action, find_actions, list_tools,
// execute_action, complete_action, fail_action, cancel_action) call the same
// service methods as the REST handlers. No rule lives here: this package only
// decodes arguments, names the calling agent, and words the answers for a
// model.
//
// # Authentication
//
// Every request must carry an agent bearer token (Authorization: Bearer
// TOKEN); without a valid, unrevoked one it is answered 401, never anything
// else. The token is checked on every request, so a revoked token stops
// working at once, mid-session too, and the token's agent is the actor of
// the call it carries. Where the store can check a token inside the
// statement that acts (PostgreSQL), a token seen valid before is taken from
// memory and the check costs no query of its own on the hot path: a call of
// a guarded tool submits with the token's hash, a drive call moves the
// action with it, and both refuse a revoked token in that statement. Every
// other request (initialize, tools/list, a read tool) looks the token up
// before the SDK handles it, and a request that no statement checked is
// looked up before its answer leaves; the answer of a cached token is held
// back until then and replaced by 401 if the token was revoked (caller.go).
//
// # Sessions
//
// The endpoint is stateless: no MCP session is kept in memory, so several
// server processes behind one address behave as one service, as the REST API
// does. Nothing here needs server-to-client messages, so no request to /mcp
// holds its connection open except a get_action wait, which takes a waiter
// slot (longpoll.Polls.AcquireWaiter) like a REST ?wait: a GET, which opens
// the standalone SSE stream of a stateful server, is 405, and a
// subscriptions/listen (its successor) ends at once, because the tools
// capability offers no listChanged to listen for. Whoever changes either
// must count the stream as a waiter (TestNoStreamWaitsUncounted).
package mcpserver

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
// TOKEN); without a valid, unrevoked one it is answered 401 before any MCP
// processing. The token is checked on every request, so a revoked token
// stops working at once, mid-session too, and the token's agent is the actor
// of the call it carries.
//
// # Sessions
//
// The endpoint is stateless: no MCP session is kept in memory, so several
// server processes behind one address behave as one service, as the REST API
// does. Nothing here needs server-to-client messages, so no request to /mcp
// holds its connection open except a get_action wait, which takes a waiter
// slot (queue.Service.AcquireWaiter) like a REST ?wait: a GET, which opens
// the standalone SSE stream of a stateful server, is 405, and a
// subscriptions/listen (its successor) ends at once, because the tools
// capability offers no listChanged to listen for. Whoever changes either
// must count the stream as a waiter (TestNoStreamWaitsUncounted).
package mcpserver

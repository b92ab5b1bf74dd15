// Package handlers parses requests, calls the queue service and answers
// with JSON (the agent REST API, api.go) or HTML (the dashboard, one file
// per page or action). Reads that carry no rule go to the store's read side
// (queue.Reader); everything that changes state goes through queue.Service.
// It imports no store and no other adapter.
package handlers

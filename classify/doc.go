// Package classify reads the tools file and decides, for every tool, what repetition does to
// it: its Class. It also owns the pure rules that depend on a tool definition: deriving an
// intent key from a payload, validating a payload against the tool's JSON Schema, rendering
// the staff preview, and the key rules shared by the REST and MCP faces.
//
// The package does no I/O beyond reading the tools file in Load.
package classify

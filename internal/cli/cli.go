// Package cli is what the commands (cmd/approvals, cmd/approvals-bench)
// share to read their flags: a flag set that reports its errors to the
// caller, and parsing that refuses arguments no flag took.
package cli

import (
	"flag"
	"fmt"
	"io"
)

// NewFlags returns a flag set named name that prints nothing: the command
// says what went wrong, with its own usage.
func NewFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// ParseFlags parses args and refuses arguments no flag took.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// Package cli is what the commands (cmd/approvals, cmd/approvals-bench)
// share to read their flags and end: a flag set that reports its errors
// to the caller, parsing that refuses arguments no flag took, and the exit
// status of a command's error.
package cli

import (
	"errors"
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

// Exit reports how command name ended and returns its exit status: the
// usage on stdout and 0 when help was asked for (flag.ErrHelp), the error
// on stderr and 1 when it failed, else 0.
func Exit(name string, err error, usage string, stdout, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	return 0
}

package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/approvals/approvals/audit"
	"github.com/approvals/approvals/internal/app"
	"github.com/approvals/approvals/internal/cli"
)

const auditUsage = "usage: approvals audit keygen | export [--since SEQ] [--out FILE] | verify [FILE --public-key KEY [--after PREVIOUS_EXPORT]]"

// auditCmd runs approvals audit keygen, export and verify (docs/audit.md).
func auditCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(auditUsage)
	}
	switch args[0] {
	case "keygen":
		return auditKeygen(args[1:], stdout)
	case "export":
		return auditExport(ctx, args[1:], stdout, stderr)
	case "verify":
		return auditVerify(ctx, args[1:], stdout)
	}
	return fmt.Errorf("unknown audit command %q; %s", args[0], auditUsage)
}

func auditKeygen(args []string, stdout io.Writer) error {
	if err := cli.ParseFlags(cli.NewFlags("audit keygen"), args); err != nil {
		return err
	}
	private, public, err := audit.GenerateKey()
	if err != nil {
		return err
	}
	// Lines a shell or an env file can take as they are.
	fmt.Fprintf(stdout, "APPROVALS_AUDIT_KEY=%s\nAPPROVALS_AUDIT_PUBLIC_KEY=%s\n", private, public)
	return nil
}

func auditExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		c     config
		since int64
		out   string
	)
	fs := cli.NewFlags("audit export")
	dbFlags(fs, &c)
	fs.Int64Var(&since, "since", 0, "export the events after this seq (the last export's checkpoint seq)")
	fs.StringVar(&out, "out", "", "write to this file instead of stdout")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if since < 0 {
		return fmt.Errorf("--since %d: a seq is 0 or more", since)
	}
	secret, err := secretEnv("APPROVALS_AUDIT_KEY")
	if err != nil {
		return err
	}
	if secret == "" {
		return errors.New("APPROVALS_AUDIT_KEY is not set: the checkpoint is signed with it (approvals audit keygen makes one)")
	}
	key, err := audit.ParsePrivateKey(secret)
	if err != nil {
		return fmt.Errorf("APPROVALS_AUDIT_KEY: %w", err)
	}
	st, _, err := app.OpenStore(ctx, c.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	w, done := stdout, func(ok bool) error { return nil }
	info := stderr
	if out != "" {
		// A whole file or none: written beside its place, renamed at the end.
		f, err := os.CreateTemp(filepath.Dir(out), filepath.Base(out)+".*.tmp")
		if err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		w, info = f, stdout
		done = func(ok bool) error {
			err := f.Close()
			if ok && err == nil {
				err = os.Rename(f.Name(), out)
			}
			if !ok || err != nil {
				os.Remove(f.Name())
			}
			return err
		}
	}
	rep, err := audit.Export(ctx, st, w, audit.ExportParams{Since: since, Key: key, Now: time.Now()})
	if derr := done(err == nil); err == nil && derr != nil {
		err = fmt.Errorf("--out %s: %w", out, derr)
	}
	if err != nil {
		return err
	}
	cp := rep.Checkpoint
	where := ""
	if out != "" {
		where = " to " + out
	}
	what := fmt.Sprintf("exported %d events (seq %d to %d)", rep.Events, since+1, cp.Seq)
	if rep.Events == 0 {
		what = fmt.Sprintf("no events after seq %d", since)
	}
	fmt.Fprintf(info, "%s%s; checkpoint at seq %d signed by public key %s\n",
		what, where, cp.Seq, audit.PublicKeyString(key.Public().(ed25519.PublicKey)))
	if rep.Unsealed > 0 {
		fmt.Fprintf(info, "%d events are not sealed yet and wait for the next export\n", rep.Unsealed)
	}
	return nil
}

func auditVerify(ctx context.Context, args []string, stdout io.Writer) error {
	var (
		c         config
		publicKey string
		after     string
	)
	fs := cli.NewFlags("audit verify")
	dbFlags(fs, &c)
	fs.StringVar(&publicKey, "public-key", env("APPROVALS_AUDIT_PUBLIC_KEY"), "the base64 public key that signed the export")
	fs.StringVar(&after, "after", "", "the earlier export this one continues (its checkpoint anchors the first event)")
	file, err := parseWithOneArg(fs, args)
	if err != nil {
		return err
	}
	if file == "" {
		var fileFlags bool
		fs.Visit(func(f *flag.Flag) { fileFlags = fileFlags || f.Name == "public-key" || f.Name == "after" })
		if fileFlags {
			return errors.New("--public-key and --after check an export: name its file (approvals audit verify FILE --public-key KEY)")
		}
		return verifyDatabase(ctx, c, stdout)
	}
	return verifyExport(file, publicKey, after, stdout)
}

// parseWithOneArg parses flags placed before or after at most one
// positional argument, which it returns.
func parseWithOneArg(fs *flag.FlagSet, args []string) (string, error) {
	var arg string
	for {
		if err := fs.Parse(args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			return arg, nil
		}
		if arg != "" {
			return "", fmt.Errorf("unexpected argument %q: name one export", fs.Arg(0))
		}
		arg, args = fs.Arg(0), fs.Args()[1:]
	}
}

func verifyDatabase(ctx context.Context, c config, stdout io.Writer) error {
	st, where, err := app.OpenStore(ctx, c.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	rep, err := audit.VerifyStore(ctx, st)
	if err != nil {
		return err
	}
	v := audit.Verification{At: time.Now().UTC(), Seq: rep.Last.Seq, OK: rep.Problem == nil}
	if rep.Problem != nil {
		v.Detail = rep.Problem.Error()
	}
	if err := st.AuditVerificationSave(ctx, v); err != nil {
		return err
	}
	if rep.Problem != nil {
		return rep.Problem
	}
	fmt.Fprintf(stdout, "audit chain in %s verified: seq 1 to %d, head %s\n", where, rep.Last.Seq, rep.Last.Hash)
	if rep.Unsealed > 0 {
		fmt.Fprintf(stdout, "%d events are waiting to be sealed\n", rep.Unsealed)
	}
	return nil
}

func verifyExport(file, publicKey, after string, stdout io.Writer) error {
	if publicKey == "" {
		return errors.New("--public-key: name the public key that signed the export (or set APPROVALS_AUDIT_PUBLIC_KEY)")
	}
	pub, err := audit.ParsePublicKey(publicKey)
	if err != nil {
		return fmt.Errorf("--public-key: %w", err)
	}
	var prev *audit.Checkpoint
	if after != "" {
		f, err := os.Open(after)
		if err != nil {
			return fmt.Errorf("--after: %w", err)
		}
		prev, err = audit.ReadCheckpoint(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("--after %s: %w", after, err)
		}
		if !prev.Verify(pub) {
			return fmt.Errorf("--after %s: its checkpoint's signature does not verify with this public key", after)
		}
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	rep, err := audit.VerifyFile(f, pub, prev)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	if rep.Problem != nil {
		return fmt.Errorf("%s: %w", file, rep.Problem)
	}
	cp := rep.Checkpoint
	what := fmt.Sprintf("seq %d to %d", rep.From.Seq+1, cp.Seq)
	if cp.Seq == rep.From.Seq {
		what = fmt.Sprintf("no events after seq %d", cp.Seq)
	}
	fmt.Fprintf(stdout, "%s verified: %s, checkpoint signed at %s\n", file, what, audit.FormatTime(cp.At))
	if !rep.Continued && rep.From.Seq > 0 {
		fmt.Fprintf(stdout, "it continues seq %d: pass --after with the export before it to check that it does\n", rep.From.Seq)
	}
	return nil
}

// cliActor is the actor of the changes a command makes: the operating
// system's user who ran it (through sudo: the one who ran sudo).
func cliActor() string {
	name := os.Getenv("SUDO_USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	if name = strings.TrimSpace(name); name == "" {
		return "cli"
	}
	return "cli:" + name
}

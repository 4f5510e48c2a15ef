package lockcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/fspath"
	"github.com/bfs-go/bfs/internal/printable"
	"github.com/bfs-go/bfs/sdk"
)

// DefaultNameServer is the nameserver address used when neither
// --nameserver nor $BFS_NAMESERVER says otherwise.
const DefaultNameServer = "127.0.0.1:8828"

// Exit codes; see the package documentation.
const (
	ExitOK       = 0
	ExitFailure  = 1
	ExitUsage    = 2
	ExitLocked   = 3
	ExitCleaning = 4
	ExitNotFound = 5
	ExitLost     = 6
)

const exitCodesHelp = `Exit codes:
  0  ok
  1  other error (nameserver unreachable, not a directory, ...)
  2  usage error (unknown command or flag, bad value, bad path)
  3  locked by another holder (also when --wait --timeout runs out)
  4  cleaning (also when unlock --wait --timeout runs out first)
  5  not found
  6  lock lost while held (forced away, session lost), or stale --epoch`

// Main runs the lockctl command line args (without the program name),
// writing results to stdout and errors to stderr, and returns the exit
// code. Cancelling ctx is what SIGINT does: `lock` releases its lock,
// `watch` stops, waits give up.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr, clock: clock.Real{}, output: outputTable}
	root := e.rootCommand()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	return e.report(cmd, err)
}

// env is one run of the command tree: where output goes, the global
// flags, and whether a command's own code ran (so that errors cobra raised
// while parsing are told apart from the command's).
type env struct {
	stdout, stderr io.Writer
	clock          clock.Clock
	nameserver     string
	// certsDir, user and insecure say how to reach the nameserver.
	certsDir, user string
	insecure       bool
	output         outputFormat
	ran            bool
}

// usageError marks a mistake in the invocation that a command found
// itself, such as a bad path or conflicting flags.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitError is an error whose exit code the command decided, for outcomes
// no single sentinel describes (a wait that ran out while still locked).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitCode maps an error from a command's own code to the exit code.
func exitCode(err error) int {
	var xe *exitError
	switch {
	case errors.As(err, &xe):
		return xe.code
	case errors.Is(err, sdk.ErrLockLost), errors.Is(err, sdk.ErrStaleEpoch):
		return ExitLost
	case errors.Is(err, sdk.ErrLocked):
		return ExitLocked
	case errors.Is(err, sdk.ErrCleaning):
		return ExitCleaning
	case errors.Is(err, sdk.ErrNotFound):
		return ExitNotFound
	case errors.Is(err, sdk.ErrInvalidArgument):
		return ExitUsage // the nameserver found the input bad
	}
	return ExitFailure
}

func (e *env) report(cmd *cobra.Command, err error) int {
	var ue usageError
	if e.ran && !errors.As(err, &ue) {
		fmt.Fprintf(e.stderr, "lockctl: %s\n", printable.Error(err))
		return exitCode(err)
	}
	name := "lockctl"
	if cmd != nil {
		name = cmd.CommandPath()
	}
	fmt.Fprintf(e.stderr, "%s: %s\nRun '%s --help' for usage.\n", name, printable.Error(err), name)
	return ExitUsage
}

func (e *env) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "lockctl",
		Short: "lockctl: inspect and operate BFS-Go directory locks",
		Long: `lockctl takes, releases, inspects and watches BFS-Go directory locks.

Paths are absolute ("/dir"). The nameserver is --nameserver, or
$BFS_NAMESERVER, or ` + DefaultNameServer + `. The connection is mutual TLS
with the client certificate of --user (default ` + certs.AdminUser + `) in --certs-dir, or
$BFS_CERTS_DIR, or ./` + certs.SandboxDir + ` (where 'bfs sandbox' makes them);
--insecure speaks plaintext to a cluster run with --insecure. Output is a table, or with
-o json one JSON document per command (one object per line for watch and
for the listings: list, sessions, history).

` + exitCodesHelp,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return usagef("no command given")
		},
	}
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	ns := os.Getenv("BFS_NAMESERVER")
	if ns == "" {
		ns = DefaultNameServer
	}
	root.PersistentFlags().StringVar(&e.nameserver, "nameserver", ns, "nameserver address (host:port); default from $BFS_NAMESERVER")
	root.PersistentFlags().VarP(&e.output, "output", "o", "output format: table or json")
	root.PersistentFlags().StringVar(&e.certsDir, "certs-dir", "", "certificates directory (default $"+certs.EnvDir+", else ./"+certs.SandboxDir+" if it exists)")
	root.PersistentFlags().StringVar(&e.user, "user", certs.AdminUser, "client certificate to present: client.USER.crt in the certificates directory")
	root.PersistentFlags().BoolVar(&e.insecure, "insecure", false, "plaintext, no certificates: for a cluster run with --insecure")
	root.AddCommand(
		e.lockCommand(),
		e.unlockCommand(),
		e.statusCommand(),
		e.listCommand(),
		e.watchCommand(),
		e.historyCommand(),
		e.sessionsCommand(),
	)
	return root
}

// run adapts a command body to cobra, marking that the command's own code
// is running from here on.
func (e *env) run(body func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		e.ran = true
		return body(cmd, args)
	}
}

// dial returns a client of the nameserver; the caller closes it.
func (e *env) dial(ctx context.Context, opts ...sdk.Option) (*sdk.Client, error) {
	dir, err := certs.ResolveDir(e.certsDir, e.insecure)
	if err != nil {
		return nil, err
	}
	return sdk.Dial(ctx, e.nameserver, append([]sdk.Option{sdk.WithCertsDir(dir, e.user)}, opts...)...)
}

// withClient runs a body that needs a client and one path argument
// (optional when defaultPath is not empty), checked before dialing.
func (e *env) withClient(defaultPath string, body func(ctx context.Context, c *sdk.Client, path string) error) func(*cobra.Command, []string) error {
	return e.run(func(cmd *cobra.Command, args []string) error {
		path := defaultPath
		if len(args) > 0 {
			path = args[0]
		}
		p, err := cleanArg(path)
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		c, err := e.dial(ctx)
		if err != nil {
			return err
		}
		err = body(ctx, c, p)
		if cerr := c.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// cleanArg checks a path argument here, so that a bad one is a usage
// error found before any network call.
func cleanArg(p string) (string, error) {
	c, err := fspath.Clean(p)
	if err != nil {
		return "", usageError{err}
	}
	return c, nil
}

// outputFormat is the -o flag.
type outputFormat string

const (
	outputTable outputFormat = "table"
	outputJSON  outputFormat = "json"
)

func (o *outputFormat) String() string { return string(*o) }
func (o *outputFormat) Type() string   { return "format" }

func (o *outputFormat) Set(s string) error {
	switch outputFormat(s) {
	case outputTable, outputJSON:
		*o = outputFormat(s)
		return nil
	}
	return fmt.Errorf("want table or json")
}

func (e *env) json() bool { return e.output == outputJSON }

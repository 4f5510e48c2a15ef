package bfscmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/internal/printable"
	"github.com/bfs-go/bfs/sdk"
)

// DefaultNameServer is the nameserver address used when neither
// --nameserver nor $BFS_NAMESERVER says otherwise.
const DefaultNameServer = "127.0.0.1:8828"

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// Main runs the bfs command line args (without the program name), writing
// results to stdout and errors to stderr, and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr}
	root := e.rootCommand()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	return e.report(cmd, err)
}

// env is one run of the command tree: where output goes, the global flags,
// and whether a command's own code ran (so that errors cobra raised while
// parsing are told apart from the command's).
type env struct {
	stdout, stderr io.Writer
	nameserver     string
	// certsDir, user and insecure are the TLS flags (see tlsFlags).
	certsDir, user string
	insecure       bool
	ran            bool
}

// errReported is returned by a command that has already printed its
// errors (one per failed path).
var errReported = errors.New("errors reported")

// usageError marks a mistake in the invocation that the command itself
// found, such as a malformed mode.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

func (e *env) report(cmd *cobra.Command, err error) int {
	var ue usageError
	switch {
	case errors.Is(err, errReported):
		return exitFailure
	case e.ran && !errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "bfs: %s\n", printable.Error(err))
		return exitFailure
	}
	name := "bfs"
	if cmd != nil {
		name = cmd.CommandPath()
	}
	fmt.Fprintf(e.stderr, "%s: %s\nRun '%s --help' for usage.\n", name, printable.Error(err), name)
	return exitUsage
}

func (e *env) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "bfs",
		Short: "BFS-Go: daemons and file commands",
		Long: `bfs runs the BFS-Go daemons and talks to a running file system.

Paths are absolute ("/dir/file"). The nameserver is --nameserver, or
$BFS_NAMESERVER, or ` + DefaultNameServer + `.

Every connection is mutual TLS. The certificates are in --certs-dir, or
$BFS_CERTS_DIR, or ./` + certs.SandboxDir + ` (where 'bfs sandbox' makes them);
file commands present the client certificate of --user (default
` + certs.ClientUser + `), 'bfs admin', 'bfs cluster' and 'bfs fsck' that of --user (default
` + certs.AdminUser + `: forcing unlocks, safe mode, decommission and the group's membership need
an admin),
daemons node.crt. --insecure speaks plaintext instead, to a cluster run
with --insecure.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("no command given")
		},
	}
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	ns := os.Getenv("BFS_NAMESERVER")
	if ns == "" {
		ns = DefaultNameServer
	}
	root.PersistentFlags().StringVar(&e.nameserver, "nameserver", ns, "the nameservers' addresses, comma-separated (host:port,...); default from $BFS_NAMESERVER")
	e.tlsFlags(root.PersistentFlags())
	root.AddCommand(
		e.nameserverCommand(),
		e.chunkserverCommand(),
		e.sandboxCommand(),
		e.lsCommand(),
		e.statCommand(),
		e.mkdirCommand(),
		e.touchzCommand(),
		e.rmCommand(),
		e.rmrCommand(),
		e.mvCommand(),
		e.duCommand(),
		e.chmodCommand(),
		e.putCommand(),
		e.getCommand(),
		e.catCommand(),
		e.locationCommand(),
		e.adminCommand(),
		e.groupCommand(),
		e.fsckCommand(),
		loggingHelp(),
		e.certCommand(),
	)
	return root
}

// tlsFlags adds the flags saying how to reach the cluster: the
// certificates directory, the client certificate, or plaintext.
func (e *env) tlsFlags(f *pflag.FlagSet) {
	f.StringVar(&e.certsDir, "certs-dir", "", "certificates directory (default $"+certs.EnvDir+", else ./"+certs.SandboxDir+" if it exists)")
	f.StringVar(&e.user, "user", "", "client certificate to present: client.USER.crt in the certificates directory (default "+certs.ClientUser+", "+certs.AdminUser+" for admin commands)")
	f.BoolVar(&e.insecure, "insecure", false, "plaintext, no certificates: for a cluster run with --insecure")
}

// run adapts a command body to cobra, marking that the command's own code
// is running from here on.
func (e *env) run(body func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		e.ran = true
		return body(cmd, args)
	}
}

// withClient runs a file command body with a client of the nameserver.
func (e *env) withClient(body func(ctx context.Context, c *sdk.Client, args []string) error) func(*cobra.Command, []string) error {
	return e.withUser(certs.ClientUser, body)
}

// withAdmin runs an admin command body with a client of the nameserver
// presenting the admin certificate unless --user says otherwise.
func (e *env) withAdmin(body func(ctx context.Context, c *sdk.Client, args []string) error) func(*cobra.Command, []string) error {
	return e.withUser(certs.AdminUser, body)
}

// withUser runs body with a client of the nameserver presenting the
// certificate of --user, else of defaultUser.
func (e *env) withUser(defaultUser string, body func(ctx context.Context, c *sdk.Client, args []string) error) func(*cobra.Command, []string) error {
	return e.run(func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		dir, err := certs.ResolveDir(e.certsDir, e.insecure)
		if err != nil {
			return err
		}
		user := e.user
		if user == "" {
			user = defaultUser
		}
		c, err := sdk.Dial(ctx, e.nameserver, sdk.WithCertsDir(dir, user))
		if err != nil {
			return err
		}
		err = body(ctx, c, args)
		if cerr := c.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// eachPath applies op to every path, printing each failure, so that one bad
// path does not stop the others; the command fails if any did.
func (e *env) eachPath(ctx context.Context, paths []string, op func(ctx context.Context, path string) error) error {
	failed := false
	for _, p := range paths {
		if err := op(ctx, p); err != nil {
			if ctx.Err() != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "bfs: %s\n", printable.Error(err))
			failed = true
		}
	}
	if failed {
		return errReported
	}
	return nil
}

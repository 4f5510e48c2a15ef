package bfscmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/internal/printable"
)

// certFlags are the flags of the bfs cert commands.
type certFlags struct {
	caKey     string
	lifetime  time.Duration
	overwrite bool
}

func (e *env) certCommand() *cobra.Command {
	var o certFlags
	cmd := &cobra.Command{
		Use:   "cert",
		Short: "Make and list the certificates of mutual TLS (a CA, node and client certificates)",
		Long: `cert makes the certificates every connection of a cluster is made with, in
the layout of 'cockroach cert': in the certificates directory (--certs-dir,
else $` + certs.EnvDir + `), ca.crt, node.crt and node.key for the daemons, and
client.NAME.crt and client.NAME.key for each client. The CA's private key is
kept apart (--ca-key) and only making certificates needs it. Private keys
are written with mode 0600; daemons and tools refuse keys others may read.

A certificate names its identity in a URI: bfs://node/NAME,
bfs://admin/NAME or bfs://client/NAME. A session belongs to the identity
that opened it: no other may use it, and only it and admins see its id.
Only admins force unlocks, take operator locks, leave safe mode,
decommission chunkservers and change the nameserver group (a node is no
admin). Daemons read the files again when they change: replace a
certificate to rotate it, no restart needed.

  bfs cert create-ca --certs-dir certs --ca-key safe/ca.key
  bfs cert create-node 10.0.0.7 ns1.example.com --certs-dir certs --ca-key safe/ca.key
  bfs cert create-client tablet --certs-dir certs --ca-key safe/ca.key
  bfs cert create-client ops --admin --certs-dir certs --ca-key safe/ca.key
  bfs cert list --certs-dir certs`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return usagef("no cert command given") },
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.caKey, "ca-key", "", "the CA's private key file (create-ca writes it, the others sign with it)")
	pf.DurationVar(&o.lifetime, "lifetime", 0, fmt.Sprintf("how long the certificate is valid (default %v for a CA, %v for the others)", certs.DefaultCALifetime, certs.DefaultCertLifetime))
	pf.BoolVar(&o.overwrite, "overwrite", false, "replace existing files")
	cmd.AddCommand(e.createCACommand(&o), e.createNodeCommand(&o), e.createClientCommand(&o), e.listCertsCommand())
	return cmd
}

// writeDir is the certificates directory the create commands write to:
// named explicitly, by --certs-dir or $BFS_CERTS_DIR.
func (e *env) writeDir() (string, error) {
	if e.certsDir != "" {
		return e.certsDir, nil
	}
	if d := os.Getenv(certs.EnvDir); d != "" {
		return d, nil
	}
	return "", usagef("say where the certificates go: --certs-dir or $%s", certs.EnvDir)
}

func (o *certFlags) options() certs.Options {
	return certs.Options{Lifetime: o.lifetime, Overwrite: o.overwrite}
}

// withAuthority runs a command making a certificate with the CA of the
// certificates directory whose key is --ca-key; issue returns the files it
// wrote, which are then described.
func (e *env) withAuthority(o *certFlags, issue func(ca *certs.Authority, dir string, args []string) (certFile, keyFile string, err error)) func(*cobra.Command, []string) error {
	return e.run(func(_ *cobra.Command, args []string) error {
		dir, err := e.writeDir()
		if err != nil {
			return err
		}
		if o.caKey == "" {
			return usagef("--ca-key is required")
		}
		ca, err := certs.LoadAuthority(dir, o.caKey)
		if err != nil {
			return err
		}
		certFile, keyFile, err := issue(ca, dir, args)
		if err != nil {
			return err
		}
		return e.printWritten(dir, certFile, keyFile)
	})
}

func (e *env) createCACommand(o *certFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "create-ca --certs-dir DIR --ca-key FILE",
		Short: "Make a CA: its certificate in DIR/ca.crt, its private key in FILE",
		Args:  cobra.NoArgs,
		RunE: e.run(func(*cobra.Command, []string) error {
			dir, err := e.writeDir()
			if err != nil {
				return err
			}
			if o.caKey == "" {
				return usagef("--ca-key is required")
			}
			if err := certs.CreateCA(dir, o.caKey, o.options()); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "wrote %s and %s\n", filepath.Join(dir, certs.CAFile), o.caKey)
			return nil
		}),
	}
}

func (e *env) createNodeCommand(o *certFlags) *cobra.Command {
	var name, role string
	cmd := &cobra.Command{
		Use:   "create-node HOST... --role nameserver|chunkserver --certs-dir DIR --ca-key FILE",
		Short: "Make a daemon's certificate (node.crt, node.key) for the IP addresses and DNS names it is reached at",
		Long: `Make a daemon's certificate (node.crt, node.key) for the IP addresses and DNS
names it is reached at. --role says what the daemon is: chunkservers take
their commands (create, seal, truncate, delete, copy) only from a
nameserver's certificate, and the nameserver registers only chunkservers'.
Give each chunkserver a certificate of its own (--name): the nameserver
takes a chunkserver's reports only from the certificate that registered it.`,
		Args: cobra.MinimumNArgs(1),
		RunE: e.withAuthority(o, func(ca *certs.Authority, dir string, hosts []string) (string, string, error) {
			if role == "" {
				return "", "", usagef("--role is required (nameserver or chunkserver)")
			}
			r, err := certs.ParseRole(role)
			if err != nil {
				return "", "", usagef("--role: %v", err)
			}
			return certs.NodeCertFile, certs.NodeKeyFile, ca.CreateNode(dir, r, name, hosts, o.options())
		}),
	}
	cmd.Flags().StringVar(&name, "name", "", "the node's name in its identity (default: the first host)")
	cmd.Flags().StringVar(&role, "role", "", "nameserver or chunkserver")
	return cmd
}

func (e *env) createClientCommand(o *certFlags) *cobra.Command {
	var admin bool
	cmd := &cobra.Command{
		Use:   "create-client NAME [--admin] --certs-dir DIR --ca-key FILE",
		Short: "Make a client's certificate (client.NAME.crt, client.NAME.key); --admin for an operator",
		Args:  cobra.ExactArgs(1),
		RunE: e.withAuthority(o, func(ca *certs.Authority, dir string, args []string) (string, string, error) {
			id := certs.Identity{Kind: certs.KindClient, Name: args[0]}
			if admin {
				id.Kind = certs.KindAdmin
			}
			return certs.ClientCertFile(id.Name), certs.ClientKeyFile(id.Name), ca.CreateClient(dir, id, o.options())
		}),
	}
	cmd.Flags().BoolVar(&admin, "admin", false, "an admin: force unlock, operator locks, safe mode, decommission, the chunkserver report, the nameserver group's membership, and every session id shown whole")
	return cmd
}

// printWritten says which files were written and what the certificate is.
func (e *env) printWritten(dir, certFile, keyFile string) error {
	infos, err := certs.List(dir)
	if err != nil {
		return err
	}
	for _, in := range infos {
		if in.File == certFile {
			fmt.Fprintf(e.stdout, "wrote %s (%s, valid until %s) and %s\n", filepath.Join(dir, certFile),
				printable.String(in.Identity.String()), in.NotAfter.UTC().Format(time.RFC3339), filepath.Join(dir, keyFile))
		}
	}
	return nil
}

func (e *env) listCertsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the certificates of the certificates directory: identity, hosts, expiry, key",
		Args:  cobra.NoArgs,
		RunE: e.run(func(*cobra.Command, []string) error {
			dir := certs.FindDir(e.certsDir)
			if dir == "" {
				return usagef("no certificates directory: give --certs-dir or $%s", certs.EnvDir)
			}
			infos, err := certs.List(dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "Certificates in %s\n", printable.String(dir))
			tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "FILE\tKIND\tNAME\tHOSTS\tEXPIRES\tKEY")
			for _, in := range infos {
				kind, name := in.Identity.Label(), in.Identity.Name
				switch {
				case in.Err != nil:
					kind, name = "error", in.Err.Error()
				case in.CA:
					kind, name = "ca", "-"
				}
				key := in.KeyFile
				if key == "" {
					key = "-"
				}
				expires := "-"
				if !in.NotAfter.IsZero() {
					expires = in.NotAfter.UTC().Format(time.RFC3339)
				}
				hosts := strings.Join(in.Hosts, ",")
				if hosts == "" {
					hosts = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", printable.String(in.File), kind, printable.String(name),
					printable.String(hosts), expires, printable.String(key))
			}
			return tw.Flush()
		}),
	}
}

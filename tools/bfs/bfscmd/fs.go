package bfscmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/internal/printable"
	"github.com/bfs-go/bfs/sdk"
)

func (e *env) lsCommand() *cobra.Command {
	var long, recursive bool
	cmd := &cobra.Command{
		Use:   "ls [-l] [-R] [PATH...]",
		Short: "List directories (the root if no PATH is given)",
		Long: `List the entries of each directory PATH, or PATH itself if it is a file.
With -l, each line shows mode, replication, size, modification time and path,
as "hdfs dfs -ls" does; locked directories also show their holder and epoch.`,
		RunE: e.withClient(func(ctx context.Context, c *sdk.Client, args []string) error {
			if len(args) == 0 {
				args = []string{"/"}
			}
			l := lister{env: e, c: c, long: long, recursive: recursive}
			return e.eachPath(ctx, args, l.ls)
		}),
	}
	cmd.Flags().BoolVarP(&long, "long", "l", false, "long listing")
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "list subdirectories recursively")
	return cmd
}

type lister struct {
	*env
	c               *sdk.Client
	long, recursive bool
}

func (l lister) ls(ctx context.Context, p string) error {
	fi, err := l.c.Stat(ctx, p)
	if err != nil {
		return err
	}
	if !fi.IsDir {
		l.print(fi)
		return nil
	}
	return l.listDir(ctx, fi.Path)
}

// listDir prints the entries of dir, and with -R those of its
// subdirectories after each one, depth first.
func (l lister) listDir(ctx context.Context, dir string) error {
	for fi, err := range l.c.ListIter(ctx, dir) {
		if err != nil {
			return err
		}
		l.print(fi)
		if l.recursive && fi.IsDir {
			if err := l.listDir(ctx, fi.Path); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l lister) print(fi *sdk.FileInfo) {
	if l.long {
		fmt.Fprintln(l.stdout, longLine(fi))
	} else {
		fmt.Fprintln(l.stdout, printable.String(fi.Path))
	}
}

func (e *env) statCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "stat PATH...",
		Short: "Show everything the nameserver knows of a file or directory",
		Args:  cobra.MinimumNArgs(1),
		RunE: e.withClient(func(ctx context.Context, c *sdk.Client, args []string) error {
			return e.eachPath(ctx, args, func(ctx context.Context, p string) error {
				fi, err := c.Stat(ctx, p)
				if err != nil {
					return err
				}
				writeStat(e.stdout, fi)
				return nil
			})
		}),
	}
}

func (e *env) mkdirCommand() *cobra.Command {
	var parents bool
	var mode string
	cmd := &cobra.Command{
		Use:   "mkdir [-p] PATH...",
		Short: "Create directories",
		Args:  cobra.MinimumNArgs(1),
		RunE: e.withClient(func(ctx context.Context, c *sdk.Client, args []string) error {
			m, err := parseMode(mode)
			if err != nil {
				return err
			}
			mkdir := c.Mkdir
			if parents {
				mkdir = c.MkdirAll
			}
			return e.eachPath(ctx, args, func(ctx context.Context, p string) error {
				return mkdir(ctx, p, m)
			})
		}),
	}
	cmd.Flags().BoolVarP(&parents, "parents", "p", false, "create missing parents; an existing directory is not an error")
	cmd.Flags().StringVarP(&mode, "mode", "m", "755", "permission bits, octal")
	return cmd
}

func (e *env) touchzCommand() *cobra.Command {
	var mode string
	var replication int
	cmd := &cobra.Command{
		Use:   "touchz PATH...",
		Short: "Create empty files",
		Long: `Create each PATH as an empty file. As with "hdfs dfs -touchz", an existing
empty file is not an error; an existing non-empty file or directory is.`,
		Args: cobra.MinimumNArgs(1),
		RunE: e.withClient(func(ctx context.Context, c *sdk.Client, args []string) error {
			m, err := parseMode(mode)
			if err != nil {
				return err
			}
			if replication < 0 {
				return usagef("replication %d is negative", replication)
			}
			return e.eachPath(ctx, args, func(ctx context.Context, p string) error {
				return touchz(ctx, c, p, sdk.Mode(m), sdk.Replication(replication))
			})
		}),
	}
	cmd.Flags().StringVarP(&mode, "mode", "m", "644", "permission bits, octal")
	cmd.Flags().IntVarP(&replication, "replication", "r", 0, "number of replicas (0: the nameserver's default)")
	return cmd
}

func touchz(ctx context.Context, c *sdk.Client, p string, opts ...sdk.CreateOption) error {
	err := c.Touch(ctx, p, opts...)
	if !errors.Is(err, sdk.ErrExists) {
		return err
	}
	if fi, serr := c.Stat(ctx, p); serr == nil && !fi.IsDir && fi.Size == 0 {
		return nil
	}
	return err
}

func (e *env) rmCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "rm PATH...",
		Short: "Delete files",
		Args:  cobra.MinimumNArgs(1),
		RunE: e.withClient(func(ctx context.Context, c *sdk.Client, args []string) error {
			return e.eachPath(ctx, args, c.Remove)
		}),
	}
}

func (e *env) rmrCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "rmr PATH...",
		Short: "Delete directories with everything under them, or files",
		Args:  cobra.MinimumNArgs(1),
		RunE: e.withClient(func(ctx context.Context, c *sdk.Client, args []string) error {
			return e.eachPath(ctx, args, func(ctx context.Context, p string) error {
				err := c.RemoveDir(ctx, p, true)
				if errors.Is(err, sdk.ErrNotDirectory) {
					return c.Remove(ctx, p)
				}
				return err
			})
		}),
	}
}

func (e *env) mvCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "mv SRC DST",
		Short: "Rename a file or directory",
		Long: `Rename SRC to DST atomically. If DST is an existing directory, SRC moves
into it under its own name; otherwise DST must not exist.`,
		Args: cobra.ExactArgs(2),
		RunE: e.withClient(func(ctx context.Context, c *sdk.Client, args []string) error {
			src, dst := args[0], args[1]
			if fi, err := c.Stat(ctx, dst); err == nil && fi.IsDir {
				dst = path.Join(fi.Path, path.Base(src))
			}
			return c.Rename(ctx, src, dst)
		}),
	}
}

func (e *env) duCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "du PATH...",
		Short: "Show bytes, files and directories under each PATH",
		Args:  cobra.MinimumNArgs(1),
		RunE: e.withClient(func(ctx context.Context, c *sdk.Client, args []string) error {
			tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "BYTES\tFILES\tDIRS\t PATH")
			err := e.eachPath(ctx, args, func(ctx context.Context, p string) error {
				u, err := c.DiskUsage(ctx, p)
				if err == nil {
					fmt.Fprintf(tw, "%d\t%d\t%d\t %s\n", u.Bytes, u.Files, u.Dirs, printable.String(p))
				}
				return err
			})
			if ferr := tw.Flush(); err == nil {
				err = ferr
			}
			return err
		}),
	}
}

func (e *env) chmodCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "chmod MODE PATH...",
		Short: "Change permission bits (MODE is octal, e.g. 750 or 1777)",
		Args:  cobra.MinimumNArgs(2),
		RunE: e.withClient(func(ctx context.Context, c *sdk.Client, args []string) error {
			m, err := parseMode(args[0])
			if err != nil {
				return err
			}
			return e.eachPath(ctx, args[1:], func(ctx context.Context, p string) error {
				return c.Chmod(ctx, p, m)
			})
		}),
	}
}

// parseMode parses an octal Unix mode such as "755", "0644" or "1777"
// (permission bits with setuid 4000, setgid 2000, sticky 1000).
func parseMode(s string) (os.FileMode, error) {
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o7777 {
		return 0, usagef("invalid mode %q: want an octal mode, 0 to 7777", s)
	}
	m := os.FileMode(v) & os.ModePerm
	for _, b := range specialBits {
		if uint32(v)&b.unix != 0 {
			m |= b.mode
		}
	}
	return m, nil
}

// specialBits pairs Unix mode bits with their os.FileMode flags.
var specialBits = []struct {
	unix uint32
	mode os.FileMode
}{
	{0o4000, os.ModeSetuid},
	{0o2000, os.ModeSetgid},
	{0o1000, os.ModeSticky},
}

// unixMode is the octal Unix form of m's permission and special bits.
func unixMode(m os.FileMode) uint32 {
	u := uint32(m.Perm())
	for _, b := range specialBits {
		if m&b.mode != 0 {
			u |= b.unix
		}
	}
	return u
}

package bfscmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bfs-go/bfs/internal/fspath"
	"github.com/bfs-go/bfs/internal/printable"
	"github.com/bfs-go/bfs/sdk"
)

// copyingSuffix names the file a put writes before it is complete; the
// put renames it to its name once closed, as hdfs dfs -put does, so a
// put that fails leaves nothing that looks complete.
const copyingSuffix = "._COPYING_"

func (e *env) putCommand() *cobra.Command {
	var overwrite bool
	var replication int
	cmd := &cobra.Command{
		Use:   "put LOCAL PATH",
		Short: "Copy a local file (or - for standard input) into the file system (written as PATH._COPYING_, renamed PATH when complete)",
		Args:  cobra.ExactArgs(2),
	}
	cmd.Flags().BoolVarP(&overwrite, "force", "f", false, "overwrite an existing file")
	cmd.Flags().IntVarP(&replication, "replication", "r", 0, "replicas of the file (0: the nameserver's default)")
	cmd.RunE = e.withClient(func(ctx context.Context, c *sdk.Client, args []string) error {
		if replication < 0 {
			return usagef("replication must not be negative")
		}
		dst, err := fspath.Clean(args[1])
		if err != nil {
			return fmt.Errorf("put %s: %w", printable.String(args[1]), sdk.ErrInvalidArgument)
		}
		if err := checkPutTarget(ctx, c, dst, overwrite); err != nil {
			return err
		}
		src, size, err := openLocal(args[0])
		if err != nil {
			return err
		}
		defer src.Close()
		tmp := dst + copyingSuffix
		// A _COPYING_ file left by a put that died is replaced.
		w, err := c.Create(ctx, tmp, sdk.Replication(replication), sdk.Overwrite())
		if err != nil {
			return err
		}
		p := e.progress("put "+printable.String(args[1]), size)
		_, err = io.Copy(w, p.reader(src))
		p.done()
		if err != nil {
			w.Close()
			return e.dropCopying(c, dst, tmp, err)
		}
		if err := w.CloseContext(ctx); err != nil {
			return e.dropCopying(c, dst, tmp, err)
		}
		if err := checkPutTarget(ctx, c, dst, overwrite); err != nil {
			e.dropCopying(c, dst, tmp, err)
			return err
		}
		if err := c.Rename(ctx, tmp, dst); err != nil {
			return e.dropCopying(c, dst, tmp, err)
		}
		return nil
	})
	return cmd
}

// checkPutTarget refuses a put over an existing file without overwrite.
// (Checked before the copy and again before the rename, which would
// replace a file: one made in between is not overwritten, but a window
// remains.)
func checkPutTarget(ctx context.Context, c *sdk.Client, dst string, overwrite bool) error {
	if overwrite {
		return nil
	}
	_, err := c.Stat(ctx, dst)
	switch {
	case err == nil:
		return fmt.Errorf("put %s: %w (--force to overwrite)", printable.String(dst), sdk.ErrExists)
	case errors.Is(err, sdk.ErrNotFound):
		return nil
	}
	return err
}

// dropCopying removes the _COPYING_ file of a put to dst that failed with
// err, and returns err; a failure to remove it is said too.
func (e *env) dropCopying(c *sdk.Client, dst, tmp string, err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if rerr := c.Remove(ctx, tmp); rerr != nil && !errors.Is(rerr, sdk.ErrNotFound) {
		fmt.Fprintf(e.stderr, "bfs: put: the incomplete copy %s stays: %v\n", printable.String(tmp), rerr)
	}
	return fmt.Errorf("put %s: %w", printable.String(dst), err)
}

func openLocal(name string) (io.ReadCloser, int64, error) {
	if name == "-" {
		return io.NopCloser(os.Stdin), -1, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if st.IsDir() {
		f.Close()
		return nil, 0, fmt.Errorf("put %s: is a directory", name)
	}
	return f, st.Size(), nil
}

func (e *env) getCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "get PATH LOCAL",
		Short: "Copy a file out of the file system (LOCAL - for standard output)",
		Args:  cobra.ExactArgs(2),
		RunE: e.withClient(func(ctx context.Context, c *sdk.Client, args []string) error {
			r, err := c.Open(ctx, args[0])
			if err != nil {
				return err
			}
			defer r.Close()
			var dst io.Writer = e.stdout
			var f *os.File
			if args[1] != "-" {
				if f, err = os.Create(args[1]); err != nil {
					return err
				}
				dst = f
			}
			p := e.progress("get "+printable.String(args[0]), r.Size())
			_, err = io.Copy(dst, p.reader(r))
			p.done()
			if f != nil {
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			return err
		}),
	}
}

func (e *env) catCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cat PATH...",
		Short: "Print files",
		Args:  cobra.MinimumNArgs(1),
		RunE: e.withClient(func(ctx context.Context, c *sdk.Client, args []string) error {
			for _, p := range args {
				r, err := c.Open(ctx, p)
				if err != nil {
					return err
				}
				_, err = io.Copy(e.stdout, r)
				r.Close()
				if err != nil {
					return err
				}
			}
			return nil
		}),
	}
}

func (e *env) locationCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "location PATH",
		Short: "Show where a file's blocks are",
		Args:  cobra.ExactArgs(1),
		RunE: e.withClient(func(ctx context.Context, c *sdk.Client, args []string) error {
			loc, err := c.Locate(ctx, args[0])
			if err != nil {
				return err
			}
			state := "closed"
			if loc.Open {
				state = "open for write"
			}
			fmt.Fprintf(e.stdout, "%s: %d bytes, %s, %d block(s)\n", printable.String(args[0]), loc.Size, state, len(loc.Blocks))
			for _, b := range loc.Blocks {
				fmt.Fprintf(e.stdout, "block %d  size %d  version %d  replicas %s\n",
					b.ID, b.Size, b.Version, printable.String(strings.Join(b.Replicas, ",")))
			}
			return nil
		}),
	}
}

// progress shows a transfer's progress on stderr when stderr is a
// terminal, at most a few times a second; elsewhere it stays silent.
type progress struct {
	w     io.Writer
	label string
	total int64
	n     int64
	start time.Time
	last  time.Time
}

func (e *env) progress(label string, total int64) *progress {
	p := &progress{label: label, total: total, start: time.Now()}
	if f, ok := e.stderr.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.w = f
		}
	}
	return p
}

func (p *progress) reader(r io.Reader) io.Reader {
	if p.w == nil {
		return r
	}
	return readerFunc(func(b []byte) (int, error) {
		n, err := r.Read(b)
		p.n += int64(n)
		if now := time.Now(); now.Sub(p.last) > 200*time.Millisecond {
			p.last = now
			p.print()
		}
		return n, err
	})
}

func (p *progress) print() {
	rate := float64(p.n) / max(time.Since(p.start).Seconds(), 1e-9) / (1 << 20)
	if p.total > 0 {
		fmt.Fprintf(p.w, "\r%s: %s / %s (%.0f%%, %.1f MiB/s)  ", p.label, human(p.n), human(p.total),
			100*float64(p.n)/float64(p.total), rate)
		return
	}
	fmt.Fprintf(p.w, "\r%s: %s (%.1f MiB/s)  ", p.label, human(p.n), rate)
}

func (p *progress) done() {
	if p.w != nil && p.n > 0 {
		p.print()
		fmt.Fprintln(p.w)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

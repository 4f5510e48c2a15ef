package sdk

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"os"

	"github.com/bfs-go/bfs/internal/fspath"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Paths are absolute and "/"-separated. They are normalized before they are
// sent (repeated slashes and "." folded); an empty or relative path, ".."
// or a NUL byte is an ErrInvalidArgument. Errors name the operation and the
// path as the caller gave it (*fs.PathError, *os.LinkError for Rename).

// Mkdir creates the directory path with permission bits mode (0 asks for
// the nameserver's default). Its parent must exist; an existing path is an
// ErrExists.
func (c *Client) Mkdir(ctx context.Context, path string, mode os.FileMode) error {
	return pathError("mkdir", path, c.mkdir(ctx, path, mode, false))
}

// MkdirAll creates the directory path and any missing parents. A path that
// already is a directory is not an error; one that is a file is.
func (c *Client) MkdirAll(ctx context.Context, path string, mode os.FileMode) error {
	err := c.mkdir(ctx, path, mode, true)
	if errors.Is(err, ErrExists) {
		if fi, serr := c.Stat(ctx, path); serr == nil && fi.IsDir {
			err = nil
		}
	}
	return pathError("mkdir", path, err)
}

func (c *Client) mkdir(ctx context.Context, path string, mode os.FileMode, parents bool) error {
	p, err := cleanPath(path)
	if err != nil {
		return err
	}
	wire, err := modeToWire(mode)
	if err != nil {
		return err
	}
	return c.mutate(ctx, func(sid string) (response, error) {
		resp, err := c.ns.Mkdir(ctx, &bfspb.MkdirRequest{Path: p, Mode: wire, Parents: parents, SessionId: sid, Fences: c.fences.of(false, p)})
		return resp, err
	})
}

// Touch creates path as an empty, closed file. An existing path is an
// ErrExists unless Overwrite is given.
func (c *Client) Touch(ctx context.Context, path string, opts ...CreateOption) error {
	return pathError("touch", path, c.touch(ctx, path, opts))
}

func (c *Client) touch(ctx context.Context, path string, opts []CreateOption) error {
	_, _, err := c.create(ctx, path, opts, false)
	return err
}

// create sends a Create and returns the new file and the session it was
// created under (which, with open, has it open for write).
func (c *Client) create(ctx context.Context, path string, opts []CreateOption, open bool) (*bfspb.FileInfo, string, error) {
	p, err := cleanPath(path)
	if err != nil {
		return nil, "", err
	}
	o := defaultCreateOptions()
	for _, opt := range opts {
		opt(&o)
	}
	wire, err := modeToWire(o.mode)
	if err != nil {
		return nil, "", err
	}
	if o.replication < 0 || o.replication > math.MaxUint32 {
		return nil, "", fmt.Errorf("%w: replication %d out of range", ErrInvalidArgument, o.replication)
	}
	var info *bfspb.FileInfo
	var session string
	err = c.mutate(ctx, func(sid string) (response, error) {
		resp, err := c.ns.Create(ctx, &bfspb.CreateRequest{
			Path:         p,
			Mode:         wire,
			Replication:  uint32(o.replication),
			Overwrite:    o.overwrite,
			SessionId:    sid,
			OpenForWrite: open,
			Fences:       c.fences.of(false, p),
		})
		info, session = resp.GetInfo(), sid
		return resp, err
	})
	return info, session, err
}

// Stat returns the FileInfo of path.
func (c *Client) Stat(ctx context.Context, path string) (*FileInfo, error) {
	fi, err := c.stat(ctx, path)
	return fi, pathError("stat", path, err)
}

func (c *Client) stat(ctx context.Context, path string) (*FileInfo, error) {
	p, err := cleanPath(path)
	if err != nil {
		return nil, err
	}
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	resp, err := c.ns.Stat(ctx, &bfspb.StatRequest{Path: p})
	if err != nil {
		return nil, transportError(ctx, err)
	}
	if err := responseError(resp); err != nil {
		return nil, err
	}
	if resp.GetInfo() == nil {
		return nil, fmt.Errorf("%w: stat answer without file info", ErrInternal)
	}
	return newFileInfo(p, resp.GetInfo()), nil
}

// List returns the entries of the directory path, sorted by name. It
// follows the nameserver's pages until the end; the result is not one
// snapshot if the directory changes meanwhile.
func (c *Client) List(ctx context.Context, path string) ([]*FileInfo, error) {
	var out []*FileInfo
	for fi, err := range c.ListIter(ctx, path) {
		if err != nil {
			return nil, err
		}
		out = append(out, fi)
	}
	return out, nil
}

// ListIter returns the entries of the directory path, sorted by name, one
// page at a time: a large directory is never held in memory whole. An
// error ends the sequence.
func (c *Client) ListIter(ctx context.Context, path string) iter.Seq2[*FileInfo, error] {
	return func(yield func(*FileInfo, error) bool) {
		p, err := cleanPath(path)
		if err == nil {
			err = c.checkOpen()
		}
		after := ""
		for err == nil {
			var entries []*bfspb.FileInfo
			var more bool
			entries, more, err = c.listPage(ctx, p, after)
			if err != nil {
				break
			}
			for _, e := range entries {
				if !yield(newFileInfo(joinPath(p, e.GetName()), e), nil) {
					return
				}
			}
			if !more {
				return
			}
			after, err = nextStart(after, entries)
		}
		yield(nil, pathError("list", path, err))
	}
}

func (c *Client) listPage(ctx context.Context, p, after string) ([]*bfspb.FileInfo, bool, error) {
	resp, err := c.ns.List(ctx, &bfspb.ListRequest{Path: p, StartAfter: after})
	if err != nil {
		return nil, false, transportError(ctx, err)
	}
	if err := responseError(resp); err != nil {
		return nil, false, err
	}
	return resp.GetEntries(), resp.GetMore(), nil
}

// nextStart returns the start_after of the page following entries, and an
// error if the nameserver's paging would not make progress.
func nextStart(after string, entries []*bfspb.FileInfo) (string, error) {
	if len(entries) == 0 {
		return "", fmt.Errorf("%w: list page is empty but says more entries follow", ErrInternal)
	}
	last := entries[len(entries)-1].GetName()
	if last <= after {
		return "", fmt.Errorf("%w: list page ends at %q, not after %q", ErrInternal, last, after)
	}
	return last, nil
}

// Remove deletes the file path. A directory is an ErrIsDirectory.
func (c *Client) Remove(ctx context.Context, path string) error {
	return pathError("remove", path, c.remove(ctx, path))
}

func (c *Client) remove(ctx context.Context, path string) error {
	p, err := cleanPath(path)
	if err != nil {
		return err
	}
	return c.mutate(ctx, func(sid string) (response, error) {
		resp, err := c.ns.DeleteFile(ctx, &bfspb.DeleteFileRequest{Path: p, SessionId: sid, Fences: c.fences.of(false, p)})
		return resp, err
	})
}

// RemoveDir deletes the directory path. Without recursive a non-empty
// directory is an ErrNotEmpty; with it, the whole subtree goes.
func (c *Client) RemoveDir(ctx context.Context, path string, recursive bool) error {
	return pathError("rmdir", path, c.removeDir(ctx, path, recursive))
}

func (c *Client) removeDir(ctx context.Context, path string, recursive bool) error {
	p, err := cleanPath(path)
	if err != nil {
		return err
	}
	// The locks of the client's session in the subtree end with it: its
	// own release (see fences).
	defer c.fences.releasing(p)()
	err = c.mutate(ctx, func(sid string) (response, error) {
		resp, err := c.ns.DeleteDir(ctx, &bfspb.DeleteDirRequest{Path: p, Recursive: recursive, SessionId: sid, Fences: c.fences.of(true, p)})
		return resp, err
	})
	if err == nil {
		c.fences.releasedWithin(p)
	}
	return err
}

// Rename moves src to dst atomically. The parent of dst must exist. A file
// replaces a file at dst; an existing directory at dst is an ErrExists, and
// a directory cannot replace a file (ErrNotDirectory) nor move into its own
// subtree (ErrInvalidArgument).
func (c *Client) Rename(ctx context.Context, src, dst string) error {
	if err := c.rename(ctx, src, dst); err != nil {
		return &os.LinkError{Op: "rename", Old: src, New: dst, Err: err}
	}
	return nil
}

func (c *Client) rename(ctx context.Context, src, dst string) error {
	s, err := cleanPath(src)
	if err != nil {
		return err
	}
	d, err := cleanPath(dst)
	if err != nil {
		return err
	}
	return c.mutate(ctx, func(sid string) (response, error) {
		resp, err := c.ns.Rename(ctx, &bfspb.RenameRequest{Src: s, Dst: d, SessionId: sid, Fences: c.fences.of(true, s, d)})
		return resp, err
	})
}

// Chmod sets the permission bits (and setuid, setgid, sticky) of path.
func (c *Client) Chmod(ctx context.Context, path string, mode os.FileMode) error {
	return pathError("chmod", path, c.chmod(ctx, path, mode))
}

func (c *Client) chmod(ctx context.Context, path string, mode os.FileMode) error {
	p, err := cleanPath(path)
	if err != nil {
		return err
	}
	wire, err := modeToWire(mode)
	if err != nil {
		return err
	}
	return c.mutate(ctx, func(sid string) (response, error) {
		resp, err := c.ns.Chmod(ctx, &bfspb.ChmodRequest{Path: p, Mode: wire, SessionId: sid, Fences: c.fences.of(false, p)})
		return resp, err
	})
}

// DiskUsage returns the bytes, files and directories under path (path
// itself included).
func (c *Client) DiskUsage(ctx context.Context, path string) (Usage, error) {
	u, err := c.diskUsage(ctx, path)
	return u, pathError("du", path, err)
}

func (c *Client) diskUsage(ctx context.Context, path string) (Usage, error) {
	p, err := cleanPath(path)
	if err != nil {
		return Usage{}, err
	}
	if err := c.checkOpen(); err != nil {
		return Usage{}, err
	}
	resp, err := c.ns.DiskUsage(ctx, &bfspb.DiskUsageRequest{Path: p})
	if err != nil {
		return Usage{}, transportError(ctx, err)
	}
	if err := responseError(resp); err != nil {
		return Usage{}, err
	}
	return Usage{Bytes: resp.GetBytes(), Files: resp.GetFiles(), Dirs: resp.GetDirs()}, nil
}

// cleanPath normalizes p, or says why it is not a valid path.
func cleanPath(p string) (string, error) {
	c, err := fspath.Clean(p)
	if err != nil {
		return "", &detailError{sentinel: ErrInvalidArgument, msg: err.Error()}
	}
	return c, nil
}

// modeBits are the os.FileMode bits a mode on the wire can carry.
const modeBits = os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky

// modeToWire converts mode to the Unix permission bits (0o7777) the
// protocol carries, refusing any other bit (os.ModeDir included: the call
// says what kind of entry it makes).
func modeToWire(mode os.FileMode) (uint32, error) {
	if mode&^modeBits != 0 {
		return 0, fmt.Errorf("%w: mode %v has bits other than permissions, setuid, setgid and sticky", ErrInvalidArgument, mode)
	}
	w := uint32(mode.Perm())
	if mode&os.ModeSetuid != 0 {
		w |= 0o4000
	}
	if mode&os.ModeSetgid != 0 {
		w |= 0o2000
	}
	if mode&os.ModeSticky != 0 {
		w |= 0o1000
	}
	return w, nil
}

// modeFromWire is the inverse of modeToWire.
func modeFromWire(w uint32) os.FileMode {
	m := os.FileMode(w) & os.ModePerm
	if w&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if w&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if w&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m
}

func joinPath(dir, name string) string {
	if dir == fspath.Root {
		return "/" + name
	}
	return dir + "/" + name
}

func baseName(p string) string {
	if p == fspath.Root {
		return fspath.Root
	}
	return fspath.Base(p)
}

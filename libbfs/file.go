package main

/*
#include "internal.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"unsafe"

	"github.com/bfs-go/bfs/sdk"
)

// file is what a bfs_file handle names: an SDK Writer or Reader. An SDK
// Writer or Reader is for one goroutine at a time (ReadAt excepted), and C
// threads may share a handle, so mu serializes the calls: ReadAt under the
// read lock, everything else under the write lock.
type file struct {
	fs     *fsys
	path   string
	handle uint64

	mu sync.RWMutex
	// Exactly one of w and r is set. A closed file is out of the handle
	// table before it is closed, so calls find it open or not at all,
	// except calls that looked it up just before: closed tells them.
	w       *sdk.Writer
	r       *sdk.Reader
	written int64 // bytes the writer took
	closed  bool
}

// lookupFile returns the file of handle h.
func lookupFile(call string, h C.bfs_file) (*file, error) {
	fl, ok := files.get(uint64(h))
	if !ok {
		return nil, fmt.Errorf("%s: %w: file handle %d", call, errBadHandle, uint64(h))
	}
	return fl, nil
}

// onFile runs fn on the file of handle h, under its lock (shared: the read
// lock), and returns its status.
func onFile(call string, h C.bfs_file, shared bool, fn func(fl *file) error) C.int {
	fl, err := lookupFile(call, h)
	if err != nil {
		return status(err)
	}
	if shared {
		fl.mu.RLock()
		defer fl.mu.RUnlock()
	} else {
		fl.mu.Lock()
		defer fl.mu.Unlock()
	}
	if fl.closed {
		return status(fmt.Errorf("%s: %w: file handle %d", call, errBadHandle, uint64(h)))
	}
	return status(fn(fl))
}

// reader returns fl's Reader, or an error if fl is open for write.
func (fl *file) reader(call string) (*sdk.Reader, error) {
	if fl.r == nil {
		return nil, invalid(call, "%s is open for write", fl.path)
	}
	return fl.r, nil
}

// writer returns fl's Writer, or an error if fl is open for reading.
func (fl *file) writer(call string) (*sdk.Writer, error) {
	if fl.w == nil {
		return nil, invalid(call, "%s is open for reading", fl.path)
	}
	return fl.w, nil
}

// abandon lets fl go with its file system, which was closed.
func (fl *file) abandon() {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	fl.closed = true
	if fl.r != nil {
		fl.r.Close()
	}
}

// buffer is the C buffer buf of n bytes as a slice (nil for none).
func buffer(call string, buf unsafe.Pointer, n C.size_t) ([]byte, error) {
	switch {
	case n == 0:
		return nil, nil
	case buf == nil:
		return nil, invalid(call, "buf is NULL")
	case uint64(n) > math.MaxInt:
		return nil, invalid(call, "length %d too large", uint64(n))
	}
	return unsafe.Slice((*byte)(buf), int(n)), nil
}

// register gives fl a handle through f.
func register(f *fsys, fl *file, out *C.bfs_file) error {
	h, err := f.addFile(fl)
	if err != nil {
		if fl.r != nil {
			fl.r.Close()
		}
		return err
	}
	*out = C.bfs_file(h)
	return nil
}

//export bfs_create
func bfs_create(fs C.bfs_fs, path *C.bfs__cchar, flags C.int, mode C.uint32_t, replication C.int, out *C.bfs_file) (code C.int) {
	defer guard(&code)
	return onFS("create", fs, func(ctx context.Context, f *fsys) error {
		p, err := goString("create", "path", path)
		if err != nil {
			return err
		}
		if err := flagsWithin("create", flags, C.BFS_CREATE_OVERWRITE); err != nil {
			return err
		}
		if out == nil {
			return invalid("create", "file is NULL")
		}
		if replication < 0 {
			return invalid("create", "replication %d is negative", int(replication))
		}
		opts := []sdk.CreateOption{sdk.Replication(int(replication))}
		if mode != 0 {
			m, err := fileMode("create", mode)
			if err != nil {
				return err
			}
			opts = append(opts, sdk.Mode(m))
		}
		if flags&C.BFS_CREATE_OVERWRITE != 0 {
			opts = append(opts, sdk.Overwrite())
		}
		w, err := f.client.Create(ctx, p, opts...)
		if err != nil {
			return err
		}
		return register(f, &file{fs: f, path: p, w: w}, out)
	})
}

//export bfs_open
func bfs_open(fs C.bfs_fs, path *C.bfs__cchar, out *C.bfs_file) (code C.int) {
	defer guard(&code)
	return onFS("open", fs, func(ctx context.Context, f *fsys) error {
		p, err := goString("open", "path", path)
		if err != nil {
			return err
		}
		if out == nil {
			return invalid("open", "file is NULL")
		}
		r, err := f.client.Open(ctx, p)
		if err != nil {
			return err
		}
		return register(f, &file{fs: f, path: p, r: r}, out)
	})
}

//export bfs_write
func bfs_write(h C.bfs_file, buf *C.bfs__cvoid, n C.size_t) (code C.int) {
	defer guard(&code)
	return onFile("write", h, false, func(fl *file) error {
		w, err := fl.writer("write")
		if err != nil {
			return err
		}
		p, err := buffer("write", unsafe.Pointer(buf), n)
		if err != nil {
			return err
		}
		k, err := w.Write(p)
		fl.written += int64(k)
		return err
	})
}

//export bfs_sync
func bfs_sync(h C.bfs_file) (code C.int) {
	defer guard(&code)
	return onFile("sync", h, false, func(fl *file) error {
		w, err := fl.writer("sync")
		if err != nil {
			return err
		}
		ctx, cancel := fl.fs.callCtx()
		defer cancel()
		return w.Sync(ctx)
	})
}

//export bfs_read
func bfs_read(h C.bfs_file, buf unsafe.Pointer, n C.size_t, nread *C.size_t) (code C.int) {
	defer guard(&code)
	return onFile("read", h, false, func(fl *file) error {
		r, err := fl.reader("read")
		if err != nil {
			return err
		}
		p, err := buffer("read", buf, n)
		if err != nil {
			return err
		}
		if nread == nil {
			return invalid("read", "n is NULL")
		}
		k, err := io.ReadFull(r, p)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = nil
		}
		if err == nil {
			*nread = C.size_t(k)
		}
		return err
	})
}

//export bfs_pread
func bfs_pread(h C.bfs_file, buf unsafe.Pointer, n C.size_t, offset C.int64_t, nread *C.size_t) (code C.int) {
	defer guard(&code)
	return onFile("pread", h, true, func(fl *file) error {
		r, err := fl.reader("pread")
		if err != nil {
			return err
		}
		p, err := buffer("pread", buf, n)
		if err != nil {
			return err
		}
		if nread == nil {
			return invalid("pread", "n is NULL")
		}
		if offset < 0 {
			return invalid("pread", "offset %d is negative", int64(offset))
		}
		k, err := r.ReadAt(p, int64(offset))
		if errors.Is(err, io.EOF) {
			err = nil
		}
		if err == nil {
			*nread = C.size_t(k)
		}
		return err
	})
}

//export bfs_seek
func bfs_seek(h C.bfs_file, offset C.int64_t, whence C.int, pos *C.int64_t) (code C.int) {
	defer guard(&code)
	return onFile("seek", h, false, func(fl *file) error {
		r, err := fl.reader("seek")
		if err != nil {
			return err
		}
		// BFS_SEEK_* are io.SeekStart, io.SeekCurrent and io.SeekEnd; the
		// Reader refuses any other whence.
		at, err := r.Seek(int64(offset), int(whence))
		if err == nil && pos != nil {
			*pos = C.int64_t(at)
		}
		return err
	})
}

//export bfs_tell
func bfs_tell(h C.bfs_file, pos *C.int64_t) (code C.int) {
	defer guard(&code)
	return onFile("tell", h, false, func(fl *file) error {
		if pos == nil {
			return invalid("tell", "pos is NULL")
		}
		if fl.w != nil {
			*pos = C.int64_t(fl.written)
			return nil
		}
		at, err := fl.r.Seek(0, io.SeekCurrent)
		if err == nil {
			*pos = C.int64_t(at)
		}
		return err
	})
}

//export bfs_file_size
func bfs_file_size(h C.bfs_file, size *C.int64_t) (code C.int) {
	defer guard(&code)
	return onFile("file_size", h, true, func(fl *file) error {
		if size == nil {
			return invalid("file_size", "size is NULL")
		}
		if fl.w != nil {
			*size = C.int64_t(fl.written)
		} else {
			*size = C.int64_t(fl.r.Size())
		}
		return nil
	})
}

//export bfs_close
func bfs_close(h C.bfs_file) (code C.int) {
	defer guard(&code)
	fl, ok := files.remove(uint64(h))
	if !ok {
		return status(fmt.Errorf("close: %w: file handle %d", errBadHandle, uint64(h)))
	}
	fl.fs.dropFile(fl.handle)
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.closed {
		return C.BFS_OK // its file system was closed meanwhile
	}
	fl.closed = true
	if fl.r != nil {
		return status(fl.r.Close())
	}
	ctx, cancel := fl.fs.callCtx()
	defer cancel()
	return status(fl.w.CloseContext(ctx))
}

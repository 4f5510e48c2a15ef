package main

/*
#include "internal.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/internal/nsgroup"
	"github.com/bfs-go/bfs/sdk"
)

// fsys is what a bfs_fs handle names: an SDK client (one nameserver
// connection, one session at a time) and the files and locks opened
// through it, which bfs_fs_close ends with it.
type fsys struct {
	client *sdk.Client
	// ctx is the parent of every call's context; close cancels it, so that
	// calls still running return BFS_ERR_CLOSED.
	ctx     context.Context
	cancel  context.CancelFunc
	timeout time.Duration // each call's bound; 0 for none

	mu struct {
		sync.Mutex
		closed bool
		files  map[uint64]*file
		locks  map[uint64]*dirLock
	}
}

// The open objects C has handles to.
var (
	filesystems handles[*fsys]
	files       handles[*file]
	locks       handles[*dirLock]
)

// fsConfig is bfs_options in Go.
type fsConfig struct {
	addrs, holder string
	ttl, timeout  time.Duration
	// certsDir is the certificates directory, "" for plaintext; user the
	// client certificate in it.
	certsDir, user string
}

// configFromC checks and copies o.
func configFromC(o *C.bfs__coptions) (fsConfig, error) {
	var cfg fsConfig
	if o.nameservers == nil {
		return cfg, invalid("fs_open", "no nameserver (options.nameservers is NULL)")
	}
	addrs, err := nsgroup.ParseAddrs(C.GoString(o.nameservers))
	switch {
	case err != nil:
		return cfg, invalid("fs_open", "options.nameservers: %v", err)
	case o.session_ttl_ms < 0:
		return cfg, invalid("fs_open", "session_ttl_ms %d is negative", int64(o.session_ttl_ms))
	case o.call_timeout_ms < 0:
		return cfg, invalid("fs_open", "call_timeout_ms %d is negative", int64(o.call_timeout_ms))
	}
	cfg.addrs = strings.Join(addrs, ",")
	if o.holder != nil {
		cfg.holder = C.GoString(o.holder)
	}
	cfg.ttl = time.Duration(o.session_ttl_ms) * time.Millisecond
	cfg.timeout = time.Duration(o.call_timeout_ms) * time.Millisecond
	cfg.certsDir, cfg.user, err = tlsFromC(o)
	return cfg, err
}

// tlsFromC resolves the TLS options as the tools resolve --certs-dir,
// --user and --insecure.
func tlsFromC(o *C.bfs__coptions) (dir, user string, err error) {
	if o.certs_dir != nil {
		dir = C.GoString(o.certs_dir)
	}
	user = certs.ClientUser
	if o.user != nil {
		user = C.GoString(o.user)
	}
	switch {
	case o.insecure != 0 && dir != "":
		return "", "", invalid("fs_open", "options.insecure and options.certs_dir exclude each other")
	case o.insecure != 0:
		return "", "", nil
	}
	if dir = certs.FindDir(dir); dir == "" {
		return "", "", invalid("fs_open", "no certificates: set options.certs_dir or $%s (the sandbox's are in %s), or options.insecure for a cluster run without TLS",
			certs.EnvDir, certs.SandboxDir)
	}
	// Read here, so that a missing or bad certificate is a bad option
	// rather than a failure to reach the nameserver.
	if _, err := certs.LoadClient(dir, user); err != nil {
		return "", "", invalid("fs_open", "%v", err)
	}
	return dir, user, nil
}

// openFS dials the nameserver and opens the session.
func openFS(cfg fsConfig) (*fsys, error) {
	var opts []sdk.Option
	if cfg.holder != "" {
		opts = append(opts, sdk.WithHolder(cfg.holder))
	}
	if cfg.ttl > 0 {
		opts = append(opts, sdk.WithSessionTTL(cfg.ttl))
	}
	if cfg.certsDir != "" {
		opts = append(opts, sdk.WithCertsDir(cfg.certsDir, cfg.user))
	}
	f := &fsys{timeout: cfg.timeout}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	ctx, cancel := f.callCtx()
	defer cancel()
	c, err := sdk.Dial(ctx, cfg.addrs, opts...)
	if err == nil {
		f.client = c
		_, err = c.Session(ctx)
		if err != nil {
			err = errors.Join(fmt.Errorf("open a session on %s: %w", cfg.addrs, err), c.Close())
		}
	}
	if err != nil {
		f.cancel()
		return nil, fmt.Errorf("fs_open: %w", err)
	}
	return f, nil
}

// callCtx is the context of one call: bounded by the handle's timeout,
// ended by close.
func (f *fsys) callCtx() (context.Context, context.CancelFunc) {
	if f.timeout > 0 {
		return context.WithTimeout(f.ctx, f.timeout)
	}
	return context.WithCancel(f.ctx)
}

// waitCtx is the context of a call that waits up to waitMS milliseconds
// (without bound if negative; 0 is an ordinary call).
func (f *fsys) waitCtx(waitMS int64) (context.Context, context.CancelFunc) {
	switch {
	case waitMS > 0:
		return context.WithTimeout(f.ctx, time.Duration(waitMS)*time.Millisecond)
	case waitMS < 0:
		return context.WithCancel(f.ctx)
	}
	return f.callCtx()
}

// errClosed is a handle opened through a file system handle that was
// closed meanwhile.
var errClosed = fmt.Errorf("%w: the file system handle was closed", sdk.ErrClosed)

// addFile registers fl and gives it its handle, unless f was closed.
func (f *fsys) addFile(fl *file) (uint64, error) {
	fl.handle = files.add(fl)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.closed {
		files.remove(fl.handle)
		return 0, errClosed
	}
	if f.mu.files == nil {
		f.mu.files = make(map[uint64]*file)
	}
	f.mu.files[fl.handle] = fl
	return fl.handle, nil
}

// addLock registers k and gives it its handle, unless f was closed.
func (f *fsys) addLock(k *dirLock) (uint64, error) {
	k.handle = locks.add(k)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.closed {
		locks.remove(k.handle)
		return 0, errClosed
	}
	if f.mu.locks == nil {
		f.mu.locks = make(map[uint64]*dirLock)
	}
	f.mu.locks[k.handle] = k
	return k.handle, nil
}

func (f *fsys) dropFile(h uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.mu.files, h)
}

func (f *fsys) dropLock(h uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.mu.locks, h)
}

// close ends f and everything opened through it (see bfs_fs_close).
func (f *fsys) close() error {
	f.mu.Lock()
	f.mu.closed = true
	fls, ks := f.mu.files, f.mu.locks
	f.mu.files, f.mu.locks = nil, nil
	f.mu.Unlock()
	for h, k := range ks {
		locks.remove(h)
		k.release()
	}
	for h := range fls {
		files.remove(h)
	}
	f.cancel()
	err := f.client.Close()
	// Calls still running on the files end now that the client is closed;
	// then the readers' streams are let go.
	for _, fl := range fls {
		fl.abandon()
	}
	return err
}

// lookupFS returns the file system of handle h.
func lookupFS(call string, h C.bfs_fs) (*fsys, error) {
	f, ok := filesystems.get(uint64(h))
	if !ok {
		return nil, fmt.Errorf("%s: %w: file system handle %d", call, errBadHandle, uint64(h))
	}
	return f, nil
}

// onFS runs fn with the file system of handle h and a call's context,
// and returns its status.
func onFS(call string, h C.bfs_fs, fn func(ctx context.Context, f *fsys) error) C.int {
	f, err := lookupFS(call, h)
	if err != nil {
		return status(err)
	}
	ctx, cancel := f.callCtx()
	defer cancel()
	return status(fn(ctx, f))
}

//export bfs_fs_open
func bfs_fs_open(options *C.bfs__coptions, fs *C.bfs_fs) (code C.int) {
	defer guard(&code)
	if options == nil || fs == nil {
		return status(invalid("fs_open", "options or fs is NULL"))
	}
	cfg, err := configFromC(options)
	if err != nil {
		return status(err)
	}
	f, err := openFS(cfg)
	if err != nil {
		return status(err)
	}
	*fs = C.bfs_fs(filesystems.add(f))
	return C.BFS_OK
}

//export bfs_fs_close
func bfs_fs_close(fs C.bfs_fs) (code C.int) {
	defer guard(&code)
	f, ok := filesystems.remove(uint64(fs))
	if !ok {
		return status(fmt.Errorf("fs_close: %w: file system handle %d", errBadHandle, uint64(fs)))
	}
	if err := f.close(); err != nil {
		return status(fmt.Errorf("fs_close: %w", err))
	}
	return C.BFS_OK
}

//export bfs_fs_holder
func bfs_fs_holder(fs C.bfs_fs, holder **C.char) (code C.int) {
	defer guard(&code)
	if holder == nil {
		return status(invalid("fs_holder", "holder is NULL"))
	}
	return onFS("fs_holder", fs, func(_ context.Context, f *fsys) error {
		*holder = cString(f.client.Holder())
		return nil
	})
}

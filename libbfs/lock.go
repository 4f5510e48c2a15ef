package main

/*
#include "internal.h"
*/
import "C"

import (
	"context"
	"fmt"
	"sync"
	"unsafe"

	"github.com/bfs-go/bfs/sdk"
)

// dirLock is what a bfs_lock handle names: an SDK Lock, and the lost-lock
// callback registered for it.
//
// The callback runs on a goroutine that waits for the lock's Done. Its
// contract with release (bfs_unlock, bfs_fs_close): once release returns,
// the callback is not running and will not start; release waits for one
// that is running, unless it is called from that very callback (which
// glue.c's thread marker tells).
type dirLock struct {
	fs     *fsys
	lock   *sdk.Lock
	handle uint64
	// releasedc is closed by release, ending the watching goroutine.
	releasedc chan struct{}

	mu struct {
		sync.Mutex
		fn C.bfs_lock_lost_fn
		// arg is the caller's void*, held as an integer: it may hold
		// anything, and the garbage collector must not follow it.
		arg C.uintptr_t
		// watching: a goroutine waits for the loss. fired: the callback
		// was called (it is called once). firing: it is running now.
		watching, fired, firing, released bool
	}
	// idle is signalled when a callback returns; its Locker is mu.
	idle sync.Cond
}

func newDirLock(f *fsys, l *sdk.Lock) *dirLock {
	k := &dirLock{fs: f, lock: l, releasedc: make(chan struct{})}
	k.idle.L = &k.mu.Mutex
	return k
}

// onLost registers fn (nil: none) and starts watching for the loss.
func (k *dirLock) onLost(fn C.bfs_lock_lost_fn, arg C.uintptr_t) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.mu.fn, k.mu.arg = fn, arg
	if fn != nil && !k.mu.watching && !k.mu.fired && !k.mu.released {
		k.mu.watching = true
		go k.watch()
	}
}

// watch waits for the loss (or the release) and calls the callback once.
func (k *dirLock) watch() {
	select {
	case <-k.lock.Done():
	case <-k.releasedc:
	}
	k.mu.Lock()
	k.mu.watching = false
	fn, arg := k.mu.fn, k.mu.arg
	if k.mu.released || k.mu.fired || fn == nil {
		k.mu.Unlock()
		return
	}
	k.mu.fired, k.mu.firing = true, true
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.mu.firing = false
		k.idle.Broadcast()
		k.mu.Unlock()
	}()
	msg := C.CString(k.lock.Err().Error())
	defer C.free(unsafe.Pointer(msg))
	C.bfs__call_lost(fn, C.bfs_lock(k.handle), C.BFS_ERR_LOCK_LOST, msg, arg)
}

// release stops the callback for good: it is not running when release
// returns, and will not start.
func (k *dirLock) release() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.mu.released {
		k.mu.released = true
		close(k.releasedc)
	}
	for k.mu.firing && C.bfs__in_callback(C.bfs_lock(k.handle)) == 0 {
		k.idle.Wait()
	}
}

// lookupLock returns the lock of handle h.
func lookupLock(call string, h C.bfs_lock) (*dirLock, error) {
	k, ok := locks.get(uint64(h))
	if !ok {
		return nil, fmt.Errorf("%s: %w: lock handle %d", call, errBadHandle, uint64(h))
	}
	return k, nil
}

//export bfs_lock_dir
func bfs_lock_dir(fs C.bfs_fs, path *C.bfs__cchar, waitMS C.int64_t, out *C.bfs_lock) (code C.int) {
	defer guard(&code)
	f, err := lookupFS("lock", fs)
	if err != nil {
		return status(err)
	}
	p, err := goString("lock", "path", path)
	if err != nil {
		return status(err)
	}
	if out == nil {
		return status(invalid("lock", "lock is NULL"))
	}
	var opts []sdk.LockOption
	if waitMS != 0 {
		opts = append(opts, sdk.WaitForLock())
	}
	ctx, cancel := f.waitCtx(int64(waitMS))
	defer cancel()
	l, err := f.client.LockDir(ctx, p, opts...)
	if err != nil {
		return status(err)
	}
	h, err := f.addLock(newDirLock(f, l))
	if err != nil {
		return status(fmt.Errorf("lock %s: %w", p, err))
	}
	*out = C.bfs_lock(h)
	return C.BFS_OK
}

//export bfs_lock_epoch
func bfs_lock_epoch(h C.bfs_lock, epoch *C.uint64_t) (code C.int) {
	defer guard(&code)
	k, err := lookupLock("lock_epoch", h)
	if err != nil {
		return status(err)
	}
	if epoch == nil {
		return status(invalid("lock_epoch", "epoch is NULL"))
	}
	*epoch = C.uint64_t(k.lock.Epoch())
	return C.BFS_OK
}

//export bfs_lock_poll
func bfs_lock_poll(h C.bfs_lock) (code C.int) {
	defer guard(&code)
	k, err := lookupLock("lock_poll", h)
	if err != nil {
		return status(err)
	}
	// Err is nil while the lock is held, and matches sdk.ErrLockLost after.
	return status(k.lock.Err())
}

//export bfs_lock_on_lost
func bfs_lock_on_lost(h C.bfs_lock, fn C.bfs_lock_lost_fn, arg unsafe.Pointer) (code C.int) {
	defer guard(&code)
	k, err := lookupLock("lock_on_lost", h)
	if err != nil {
		return status(err)
	}
	k.onLost(fn, C.uintptr_t(uintptr(arg)))
	return C.BFS_OK
}

//export bfs_unlock
func bfs_unlock(h C.bfs_lock) (code C.int) {
	defer guard(&code)
	k, ok := locks.remove(uint64(h))
	if !ok {
		return status(fmt.Errorf("unlock: %w: lock handle %d", errBadHandle, uint64(h)))
	}
	k.fs.dropLock(k.handle)
	k.release()
	ctx, cancel := k.fs.callCtx()
	defer cancel()
	return status(k.lock.Unlock(ctx))
}

//export bfs_unlock_dir
func bfs_unlock_dir(fs C.bfs_fs, path *C.bfs__cchar, flags C.int, waitMS C.int64_t, state *C.int) (code C.int) {
	defer guard(&code)
	f, err := lookupFS("unlock", fs)
	if err != nil {
		return status(err)
	}
	p, err := goString("unlock", "path", path)
	if err != nil {
		return status(err)
	}
	if err := flagsWithin("unlock", flags, C.BFS_UNLOCK_FORCE); err != nil {
		return status(err)
	}
	var opts []sdk.UnlockOption
	if flags&C.BFS_UNLOCK_FORCE != 0 {
		opts = append(opts, sdk.Force())
	}
	if waitMS != 0 {
		opts = append(opts, sdk.WaitUnlocked())
	}
	ctx, cancel := f.waitCtx(int64(waitMS))
	defer cancel()
	d, err := f.client.UnlockDir(ctx, p, opts...)
	if err != nil {
		return status(err)
	}
	if state != nil {
		*state = C.int(lockStatusToC(d.Status))
	}
	return C.BFS_OK
}

//export bfs_lock_status
func bfs_lock_status(fs C.bfs_fs, path *C.bfs__cchar, info *C.bfs_lock_info) (code C.int) {
	defer guard(&code)
	return onFS("lock_status", fs, func(ctx context.Context, f *fsys) error {
		p, err := goString("lock_status", "path", path)
		if err != nil {
			return err
		}
		if info == nil {
			return invalid("lock_status", "info is NULL")
		}
		d, err := f.client.GetDirLock(ctx, p)
		if err != nil {
			return err
		}
		*info = lockInfoToC(d)
		return nil
	})
}

func lockInfoToC(d *sdk.DirLock) C.bfs_lock_info {
	info := C.bfs_lock_info{
		status:        lockStatusToC(d.Status),
		epoch:         C.uint64_t(d.Epoch),
		pending_files: C.size_t(len(d.Pending)),
	}
	if d.Holder != "" {
		info.holder = cString(d.Holder)
	}
	if d.SessionID != "" {
		info.session_id = cString(d.SessionID)
	}
	if !d.Since.IsZero() {
		info.since_ns = C.int64_t(d.Since.UnixNano())
	}
	return info
}

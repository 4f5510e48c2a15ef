package main

/*
#include "internal.h"
*/
import "C"

import (
	"context"
	"os"
	"unsafe"

	"github.com/bfs-go/bfs/sdk"
)

// fileMode turns C permission bits (07777) into an os.FileMode.
func fileMode(call string, m C.uint32_t) (os.FileMode, error) {
	if m&^0o7777 != 0 {
		return 0, invalid(call, "mode %#o has bits beyond 07777", uint32(m))
	}
	mode := os.FileMode(m & 0o777)
	for _, b := range modeBits {
		if uint32(m)&b.unix != 0 {
			mode |= b.goMode
		}
	}
	return mode, nil
}

// modeToC is fileMode's inverse.
func modeToC(mode os.FileMode) C.uint32_t {
	m := uint32(mode.Perm())
	for _, b := range modeBits {
		if mode&b.goMode != 0 {
			m |= b.unix
		}
	}
	return C.uint32_t(m)
}

var modeBits = []struct {
	unix   uint32
	goMode os.FileMode
}{{0o4000, os.ModeSetuid}, {0o2000, os.ModeSetgid}, {0o1000, os.ModeSticky}}

func lockStatusToC(s sdk.LockStatus) C.int32_t {
	switch s {
	case sdk.Locked:
		return C.BFS_LOCK_LOCKED
	case sdk.Cleaning:
		return C.BFS_LOCK_CLEANING
	}
	return C.BFS_LOCK_UNLOCKED
}

func fileInfoToC(fi *sdk.FileInfo) C.bfs_file_info {
	info := C.bfs_file_info{
		size:        C.int64_t(fi.Size),
		entry_id:    C.uint64_t(fi.EntryID),
		lock_epoch:  C.uint64_t(fi.Epoch),
		mode:        modeToC(fi.Mode),
		replication: C.int32_t(fi.Replication),
		lock_status: lockStatusToC(fi.LockStatus),
	}
	if !fi.ModTime.IsZero() {
		info.mtime_ns = C.int64_t(fi.ModTime.UnixNano())
	}
	if fi.IsDir {
		info.is_dir = 1
	}
	if fi.WriterSession != "" {
		info.open_for_write = 1
	}
	return info
}

// flagsWithin checks that flags has no bits beyond known.
func flagsWithin(call string, flags C.int, known C.int) error {
	if flags&^known != 0 {
		return invalid(call, "unknown flags %#x", int(flags&^known))
	}
	return nil
}

//export bfs_mkdir
func bfs_mkdir(fs C.bfs_fs, path *C.bfs__cchar, mode C.uint32_t, flags C.int) (code C.int) {
	defer guard(&code)
	return onFS("mkdir", fs, func(ctx context.Context, f *fsys) error {
		p, err := goString("mkdir", "path", path)
		if err != nil {
			return err
		}
		if err := flagsWithin("mkdir", flags, C.BFS_MKDIR_PARENTS); err != nil {
			return err
		}
		m, err := fileMode("mkdir", mode)
		if err != nil {
			return err
		}
		if flags&C.BFS_MKDIR_PARENTS != 0 {
			return f.client.MkdirAll(ctx, p, m)
		}
		return f.client.Mkdir(ctx, p, m)
	})
}

//export bfs_remove
func bfs_remove(fs C.bfs_fs, path *C.bfs__cchar) (code C.int) {
	defer guard(&code)
	return onFS("remove", fs, func(ctx context.Context, f *fsys) error {
		p, err := goString("remove", "path", path)
		if err != nil {
			return err
		}
		return f.client.Remove(ctx, p)
	})
}

//export bfs_rmdir
func bfs_rmdir(fs C.bfs_fs, path *C.bfs__cchar, flags C.int) (code C.int) {
	defer guard(&code)
	return onFS("rmdir", fs, func(ctx context.Context, f *fsys) error {
		p, err := goString("rmdir", "path", path)
		if err != nil {
			return err
		}
		if err := flagsWithin("rmdir", flags, C.BFS_RMDIR_RECURSIVE); err != nil {
			return err
		}
		return f.client.RemoveDir(ctx, p, flags&C.BFS_RMDIR_RECURSIVE != 0)
	})
}

//export bfs_rename
func bfs_rename(fs C.bfs_fs, src, dst *C.bfs__cchar) (code C.int) {
	defer guard(&code)
	return onFS("rename", fs, func(ctx context.Context, f *fsys) error {
		s, err := goString("rename", "src", src)
		if err != nil {
			return err
		}
		d, err := goString("rename", "dst", dst)
		if err != nil {
			return err
		}
		return f.client.Rename(ctx, s, d)
	})
}

//export bfs_chmod
func bfs_chmod(fs C.bfs_fs, path *C.bfs__cchar, mode C.uint32_t) (code C.int) {
	defer guard(&code)
	return onFS("chmod", fs, func(ctx context.Context, f *fsys) error {
		p, err := goString("chmod", "path", path)
		if err != nil {
			return err
		}
		m, err := fileMode("chmod", mode)
		if err != nil {
			return err
		}
		return f.client.Chmod(ctx, p, m)
	})
}

//export bfs_stat
func bfs_stat(fs C.bfs_fs, path *C.bfs__cchar, info *C.bfs_file_info) (code C.int) {
	defer guard(&code)
	return onFS("stat", fs, func(ctx context.Context, f *fsys) error {
		p, err := goString("stat", "path", path)
		if err != nil {
			return err
		}
		if info == nil {
			return invalid("stat", "info is NULL")
		}
		fi, err := f.client.Stat(ctx, p)
		if err != nil {
			return err
		}
		*info = fileInfoToC(fi)
		return nil
	})
}

//export bfs_list
func bfs_list(fs C.bfs_fs, path *C.bfs__cchar, entries **C.bfs_dirent, count *C.size_t) (code C.int) {
	defer guard(&code)
	return onFS("list", fs, func(ctx context.Context, f *fsys) error {
		p, err := goString("list", "path", path)
		if err != nil {
			return err
		}
		if entries == nil || count == nil {
			return invalid("list", "entries or count is NULL")
		}
		fis, err := f.client.List(ctx, p)
		if err != nil {
			return err
		}
		*entries, *count = direntsToC(fis), C.size_t(len(fis))
		return nil
	})
}

// direntsToC returns fis as a malloc'd array (nil when empty) for
// bfs_dirents_free.
func direntsToC(fis []*sdk.FileInfo) *C.bfs_dirent {
	if len(fis) == 0 {
		return nil
	}
	// C.malloc never returns NULL: cgo's wrapper crashes on exhaustion.
	arr := (*C.bfs_dirent)(C.malloc(C.size_t(len(fis)) * C.size_t(unsafe.Sizeof(C.bfs_dirent{}))))
	ents := unsafe.Slice(arr, len(fis))
	for i, fi := range fis {
		ents[i] = C.bfs_dirent{name: cString(fi.Name), info: fileInfoToC(fi)}
	}
	return arr
}

package sdk

import (
	"fmt"
	"os"
	"time"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// FileInfo describes a file or directory.
type FileInfo struct {
	// Path is the normalized absolute path; Name its last component ("/"
	// for the root).
	Path  string
	Name  string
	IsDir bool
	// Mode holds the permission bits (with os.ModeSetuid, os.ModeSetgid and
	// os.ModeSticky when set), and os.ModeDir for a directory.
	Mode    os.FileMode
	Size    int64
	ModTime time.Time
	// Replication is the number of replicas of a file's blocks.
	Replication int
	// LiveReplicas is how many replicas of a closed file's block are on
	// live chunkservers (the fewest over its blocks), which a degraded
	// write or a dead chunkserver leaves below Replication; -1 when not
	// known (a directory, an open file, a file with no block).
	LiveReplicas int
	// EntryID is the nameserver's id for the entry; it survives renames.
	EntryID uint64

	// Directory lock fields, for directories.
	LockStatus LockStatus
	Holder     string
	Epoch      uint64

	// WriterSession is the session that has the file open for write; empty
	// when the file is closed.
	WriterSession string
}

// LockStatus is the state of a directory lock.
type LockStatus int

// Directory lock states.
const (
	Unlocked LockStatus = iota
	Locked
	Cleaning
)

func (s LockStatus) String() string {
	switch s {
	case Unlocked:
		return "unlocked"
	case Locked:
		return "locked"
	case Cleaning:
		return "cleaning"
	}
	return fmt.Sprintf("LockStatus(%d)", int(s))
}

// Usage is the disk usage of a subtree.
type Usage struct {
	Bytes int64
	Files int64
	Dirs  int64
}

func newFileInfo(path string, pb *bfspb.FileInfo) *FileInfo {
	fi := &FileInfo{
		Path:          path,
		Name:          baseName(path),
		IsDir:         pb.GetType() == bfspb.FileType_FILE_TYPE_DIR,
		Mode:          modeFromWire(pb.GetMode()),
		Size:          pb.GetSize(),
		Replication:   int(pb.GetReplication()),
		EntryID:       pb.GetEntryId(),
		LockStatus:    LockStatus(pb.GetLockStatus()),
		Holder:        pb.GetHolder(),
		Epoch:         pb.GetEpoch(),
		WriterSession: pb.GetWriterSession(),
		LiveReplicas:  -1,
	}
	if pb != nil && pb.LiveReplicas != nil {
		fi.LiveReplicas = int(pb.GetLiveReplicas())
	}
	if fi.IsDir {
		fi.Mode |= os.ModeDir
	}
	if ns := pb.GetMtimeNs(); ns != 0 {
		fi.ModTime = time.Unix(0, ns)
	}
	return fi
}

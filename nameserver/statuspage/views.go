package statuspage

import (
	"strings"
	"time"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// The types below are what the JSON endpoints answer and what the HTML
// templates render: one description of each row for both.

// Lock is a directory lock.
type Lock struct {
	Path string `json:"path"`
	// State is LOCKED, CLEANING or UNLOCKED.
	State  string `json:"state"`
	Holder string `json:"holder,omitempty"`
	// Session is a prefix of the holder's session id.
	Session string `json:"session,omitempty"`
	Epoch   uint64 `json:"epoch,omitempty"`
	// Since is when the directory entered its state (absent if unknown).
	Since *time.Time `json:"since,omitempty"`
	// PendingFiles counts, while CLEANING, the files still to be sealed
	// and closed; Pending lists them (in /api/lock only).
	PendingFiles int           `json:"pending_files"`
	Pending      []PendingFile `json:"pending,omitempty"`
}

// PendingFile is a file a cleaning still waits for, with the replicas
// that have not confirmed its seal.
type PendingFile struct {
	Path     string   `json:"path"`
	BlockID  int64    `json:"block_id"`
	Replicas []string `json:"replicas"`
}

// LockDetail is one directory's lock and its stored history.
type LockDetail struct {
	Lock
	// History is the directory's past locks, newest first (the
	// nameserver keeps the last 64).
	History []HistoryEntry `json:"history"`
}

// HistoryEntry is one past lock of a directory, as stored.
type HistoryEntry struct {
	Holder         string     `json:"holder"`
	Epoch          uint64     `json:"epoch"`
	LockedAt       *time.Time `json:"locked_at,omitempty"`
	UnlockedAt     *time.Time `json:"unlocked_at,omitempty"`
	Reason         string     `json:"reason"`
	FilesSealed    int64      `json:"files_sealed"`
	BytesTruncated int64      `json:"bytes_truncated"`
}

// Session is a live session.
type Session struct {
	// ID is a prefix of the session id.
	ID          string `json:"id"`
	Holder      string `json:"holder"`
	TTLMs       int64  `json:"ttl_ms"`
	RemainingMs int64  `json:"remaining_ms"`
	OpenFiles   int64  `json:"open_files"`
	Locks       int64  `json:"locks"`
}

// Chunkserver is a chunkserver the nameserver knows.
type Chunkserver struct {
	Address string `json:"address"`
	Host    string `json:"host,omitempty"`
	// State is LIVE, DRAINING, DECOMMISSIONED or DEAD.
	State           string `json:"state"`
	CapacityBytes   int64  `json:"capacity_bytes"`
	UsedBytes       int64  `json:"used_bytes"`
	FreeBytes       int64  `json:"free_bytes"`
	Blocks          int64  `json:"blocks"`
	LastHeartbeatMs int64  `json:"last_heartbeat_ms"`
	BlocksToMove    int64  `json:"blocks_to_move"`
	// Volumes are the chunkserver's data directories, one per disk, for
	// a nameserver whose chunkservers report them; the table nests them
	// under their chunkserver.
	Volumes []Volume `json:"volumes,omitempty"`
}

// Volume is one data directory of a chunkserver.
type Volume struct {
	Path          string `json:"path"`
	State         string `json:"state"`
	CapacityBytes int64  `json:"capacity_bytes"`
	FreeBytes     int64  `json:"free_bytes"`
	Blocks        int64  `json:"blocks"`
}

// sessionIDShown is how much of a session id the page shows: enough to
// tell sessions apart, far too little to act as one.
const sessionIDShown = 8

// sessionPrefix is what the page shows of a session id. An operator
// lock's session id is no secret (no client has it) and is shown whole.
func sessionPrefix(id string) string {
	if len(id) <= sessionIDShown || strings.HasPrefix(id, "operator-") {
		return id
	}
	return id[:sessionIDShown] + "…"
}

func stateName(s bfspb.LockStatus) string {
	return strings.TrimPrefix(s.String(), "LOCK_STATUS_")
}

func timeOf(ns int64) *time.Time {
	if ns == 0 {
		return nil
	}
	t := time.Unix(0, ns)
	return &t
}

func lockOf(d *bfspb.DirLock) Lock {
	l := Lock{Path: d.GetPath(), State: stateName(d.GetStatus()), Holder: d.GetHolder(),
		Session: sessionPrefix(d.GetSessionId()), Epoch: d.GetEpoch(), Since: timeOf(d.GetSinceNs()),
		PendingFiles: len(d.GetPending())}
	return l
}

func pendingOf(d *bfspb.DirLock) []PendingFile {
	out := make([]PendingFile, 0, len(d.GetPending()))
	for _, p := range d.GetPending() {
		out = append(out, PendingFile{Path: p.GetPath(), BlockID: p.GetBlockId(), Replicas: p.GetPendingReplicas()})
	}
	return out
}

func historyOf(e *bfspb.LockHistoryEntry) HistoryEntry {
	return HistoryEntry{Holder: e.GetHolder(), Epoch: e.GetEpoch(), LockedAt: timeOf(e.GetLockedAtNs()),
		UnlockedAt: timeOf(e.GetUnlockedAtNs()), Reason: e.GetReason(), FilesSealed: e.GetFilesSealed(),
		BytesTruncated: e.GetBytesTruncated()}
}

func sessionOf(s *bfspb.SessionInfo) Session {
	return Session{ID: sessionPrefix(s.GetSessionId()), Holder: s.GetHolder(), TTLMs: s.GetTtlMs(),
		RemainingMs: s.GetRemainingMs(), OpenFiles: s.GetOpenFiles(), Locks: s.GetLockCount()}
}

func chunkserverOf(c *bfspb.ChunkserverInfo) Chunkserver {
	return Chunkserver{Address: c.GetAddress(), Host: c.GetHost(),
		State:         strings.TrimPrefix(c.GetState().String(), "CHUNKSERVER_STATE_"),
		CapacityBytes: c.GetCapacityBytes(), UsedBytes: c.GetUsedBytes(), FreeBytes: c.GetFreeBytes(),
		Blocks: c.GetBlocks(), LastHeartbeatMs: c.GetLastHeartbeatAgeMs(), BlocksToMove: c.GetBlocksToMove()}
}

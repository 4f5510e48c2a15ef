package tablet

import (
	"encoding/binary"
	"errors"
	"hash/fnv"

	"github.com/bfs-go/bfs/sdk"
)

// Event kinds, in the order a run reports them.
const (
	// KindLocked: Path is locked at Epoch.
	KindLocked = "locked"
	// KindOpened: the file Path is open for write, its block is Block on
	// Replicas (after the first synced append).
	KindOpened = "opened"
	// KindReady: every file is open and holds Config.Initial synced bytes.
	KindReady = "ready"
	// KindOp: one attempted operation (Op) and whether the file system
	// accepted it (OK).
	KindOp = "op"
	// KindLockLost: the handle of the lock on Path closed its Done channel.
	KindLockLost = "lock_lost"
	// KindRoundStart and KindRoundDone bound a round of stale operations
	// a Rounds run was told to try (Path is the round's label).
	KindRoundStart = "round_start"
	KindRoundDone  = "round_done"
	// KindFinished: the run is over (Serve mode); the process exits next.
	KindFinished = "finished"
	// KindFatal: the run could not go on; Err says why.
	KindFatal = "fatal"
)

// Operations a KindOp event reports.
const (
	// OpAppend is Write then Sync on an open file: Offset and Len are the
	// bytes appended, Synced the file's synced length once it succeeded.
	OpAppend = "append"
	// OpRawWrite is one packet sent straight to a chunkserver (Replica)
	// on a new write stream for the file's block, as a writer that has not
	// heard of the fencing would: accepted only if acknowledged OK.
	OpRawWrite = "raw_write"
	OpCreate   = "create"
	OpMkdir    = "mkdir"
	OpRename   = "rename"
	OpDelete   = "delete"
	OpRmdir    = "rmdir"
	OpLock     = "lock"
)

// Event is one line of a run's report.
type Event struct {
	Kind     string   `json:"kind"`
	Op       string   `json:"op,omitempty"`
	Path     string   `json:"path,omitempty"`
	Epoch    uint64   `json:"epoch,omitempty"`
	Offset   int64    `json:"offset,omitempty"`
	Len      int      `json:"len,omitempty"`
	Synced   int64    `json:"synced,omitempty"`
	Block    int64    `json:"block,omitempty"`
	Replicas []string `json:"replicas,omitempty"`
	Replica  string   `json:"replica,omitempty"`
	// Session is the client's session id (KindLocked, KindRoundDone).
	Session string `json:"session,omitempty"`
	OK      bool   `json:"ok"`
	// Refusal names why an operation was refused: an SDK sentinel
	// ("sealed", "locked", ...) or a chunkserver status ("SEALED", ...).
	Refusal string `json:"refusal,omitempty"`
	Err     string `json:"err,omitempty"`
	// StartNs and EndNs bound an operation, in Unix nanoseconds of the
	// host's wall clock (the test compares them with its own).
	StartNs int64 `json:"start_ns,omitempty"`
	EndNs   int64 `json:"end_ns,omitempty"`
}

// Pattern returns the n bytes a run writes at offset off of the file
// path: a pseudo-random stream that depends on the path and the position,
// so that bytes in the wrong place or from another file show.
func Pattern(path string, off int64, n int) []byte {
	h := fnv.New64a()
	h.Write([]byte(path))
	seed := h.Sum64()
	out := make([]byte, n)
	var word [8]byte
	for i := range out {
		pos := off + int64(i)
		if i == 0 || pos%8 == 0 {
			binary.LittleEndian.PutUint64(word[:], splitmix(seed+uint64(pos/8)))
		}
		out[i] = word[pos%8]
	}
	return out
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// refusals names the SDK sentinels an operation may be refused with.
var refusals = []struct {
	err  error
	name string
}{
	{sdk.ErrSealed, "sealed"},
	{sdk.ErrLocked, "locked"},
	{sdk.ErrCleaning, "cleaning"},
	{sdk.ErrNotOpen, "not_open"},
	{sdk.ErrSessionExpired, "session_expired"},
	{sdk.ErrStaleEpoch, "stale_epoch"},
	{sdk.ErrNotFound, "not_found"},
	{sdk.ErrExists, "exists"},
	{sdk.ErrUnavailable, "unavailable"},
}

// Refusal names err for a report ("" for nil, "other" for an error that
// is none of the SDK's refusals).
func Refusal(err error) string {
	if err == nil {
		return ""
	}
	for _, r := range refusals {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return "other"
}

package namespace

import (
	"encoding/binary"
	"slices"
)

// Every key the nameserver stores is built here. The first byte is the
// record kind; nothing else in the code knows the layout.
const (
	prefixEntry   byte = 'e' // 'e' + parent id (8 bytes BE) + name -> FileInfo
	prefixSystem  byte = 's' // 's' + name -> system value
	prefixSession byte = 'S' // 'S' + session id -> SessionRecord
	prefixID      byte = 'i' // 'i' + entry id -> parent id + name (where the entry is)
	prefixBlock   byte = 'b' // 'b' + block id -> entry id of the file it belongs to
	prefixOpen    byte = 'w' // 'w' + len + session id + entry id -> "" (files open for write)
	prefixLock    byte = 'L' // 'L' + dir entry id -> "" (directories LOCKED or CLEANING)
	prefixClean   byte = 'c' // 'c' + dir entry id -> CleaningRecord
	prefixHistory byte = 'h' // 'h' + dir entry id + epoch -> LockHistoryEntry
	prefixMember  byte = 'm' // 'm' + member name -> Member (the nameserver group)
)

// RootID is the entry id of "/". The root's own FileInfo is stored under
// parent id 0 with an empty name.
const RootID uint64 = 1

// rootParentID is the parent id the root is stored under.
const rootParentID uint64 = 0

// firstID is the first id handed to an entry other than the root.
const firstID uint64 = 2

var (
	// keyNextID holds the highest entry or block id ever handed out.
	keyNextID = []byte{prefixSystem, 'i', 'd'}
	// keyEpoch holds the highest lock epoch ever granted.
	keyEpoch = []byte{prefixSystem, 'e', 'p', 'o', 'c', 'h'}
	// keyApplied holds the log index of the last command applied.
	keyApplied = []byte{prefixSystem, 'a', 'p', 'p', 'l', 'i', 'e', 'd'}
	// keyClusterID holds the cluster id, written once when the store is
	// formatted (see ClusterID).
	keyClusterID = []byte{prefixSystem, 'c', 'l', 'u', 's', 't', 'e', 'r'}
	// keyDrain, followed by a chunkserver's address, marks it draining
	// (see Draining).
	keyDrain = []byte{prefixSystem, 'd', 'r', 'a', 'i', 'n', 0}
)

func drainKey(addr string) []byte { return append(slices.Clip(keyDrain), addr...) }

// keyChunkserver, followed by a chunkserver's address, holds what the
// nameserver remembers of it (a ChunkserverRecord, see Chunkservers).
var keyChunkserver = []byte{prefixSystem, 'c', 's', 0}

func chunkserverKey(addr string) []byte { return append(slices.Clip(keyChunkserver), addr...) }

// entryKey returns the key of the entry name in directory parent.
func entryKey(parent uint64, name string) []byte {
	k := make([]byte, 9+len(name))
	k[0] = prefixEntry
	binary.BigEndian.PutUint64(k[1:9], parent)
	copy(k[9:], name)
	return k
}

// childBounds returns the key range holding the children of dir.
func childBounds(dir uint64) (lower, upper []byte) {
	return entryKey(dir, ""), entryKey(dir+1, "")
}

func sessionKey(id string) []byte {
	return append([]byte{prefixSession}, id...)
}

func sessionBounds() (lower, upper []byte) {
	return []byte{prefixSession}, []byte{prefixSession + 1}
}

func encodeUint64(v uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, v)
}

func decodeUint64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func idKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixID}, id)
}

// idValue is where an entry is: its parent id and name.
func idValue(parent uint64, name string) []byte {
	return append(binary.BigEndian.AppendUint64(nil, parent), name...)
}

func blockKey(id int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixBlock}, uint64(id))
}

func openKey(session string, entry uint64) []byte {
	k := append([]byte{prefixOpen, byte(len(session))}, session...)
	return binary.BigEndian.AppendUint64(k, entry)
}

// openBounds is the range of open-file keys of session, or of every
// session if session is "".
func openBounds(session string) (lower, upper []byte) {
	if session == "" {
		return []byte{prefixOpen}, []byte{prefixOpen + 1}
	}
	lower = append([]byte{prefixOpen, byte(len(session))}, session...)
	return lower, append(append([]byte(nil), lower...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
}

// openKeyEntry returns the session and entry id of an open-file key.
func openKeyEntry(k []byte) (string, uint64) {
	n := int(k[1])
	return string(k[2 : 2+n]), binary.BigEndian.Uint64(k[2+n:])
}

func lockKey(dir uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixLock}, dir)
}

func cleanKey(dir uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixClean}, dir)
}

func historyKey(dir, epoch uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64([]byte{prefixHistory}, dir), epoch)
}

// historyBounds is the range of dir's history entries, oldest first.
func historyBounds(dir uint64) (lower, upper []byte) {
	lower = binary.BigEndian.AppendUint64([]byte{prefixHistory}, dir)
	return lower, binary.BigEndian.AppendUint64([]byte{prefixHistory}, dir+1)
}

// prefixBounds is the range of every key starting with prefix byte p.
func prefixBounds(p byte) (lower, upper []byte) {
	return []byte{p}, []byte{p + 1}
}

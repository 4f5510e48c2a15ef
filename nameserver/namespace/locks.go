package namespace

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Locks returns the in-memory lock table. It mirrors what is stored and is
// changed only by Apply (and by Open, which loads it).
func (s *Store) Locks() *dirlock.Table { return s.locks }

// loadLocks fills the lock table from the lock index.
func (s *Store) loadLocks() error {
	lower, upper := prefixBounds(prefixLock)
	var ids []uint64
	if err := scanKeys(s.db, lower, upper, func(k, _ []byte) error {
		ids = append(ids, decodeUint64(k[1:]))
		return nil
	}); err != nil {
		return err
	}
	for _, id := range ids {
		path, info, err := pathOf(s.db, id)
		if err != nil {
			return fmt.Errorf("namespace: locked directory %d: %w", id, err)
		}
		s.locks.Set(lockOf(path, info))
	}
	return nil
}

func lockOf(path string, info *bfspb.FileInfo) dirlock.Lock {
	st := dirlock.Locked
	if info.LockStatus == bfspb.LockStatus_LOCK_STATUS_CLEANING {
		st = dirlock.Cleaning
	}
	return dirlock.Lock{
		Path: path, Status: st, Holder: info.Holder, Session: dirlock.SessionID(info.HolderSession),
		Epoch: dirlock.Epoch(info.Epoch), Since: time.Unix(0, info.LockSinceNs), EntryID: info.EntryId,
	}
}

// operatorPrefix starts the session id of every operator lock.
const operatorPrefix = "operator-"

// OperatorSession is the session id recorded for an operator lock: no
// client ever has it, so nobody mutates under such a lock, and no session
// expiry releases it.
func OperatorSession(epoch uint64) dirlock.SessionID {
	return dirlock.SessionID(operatorPrefix + strconv.FormatUint(epoch, 10))
}

// IsOperatorSession reports whether id is the session of an operator
// lock (see OperatorSession): one that is never live, and must not be
// released for that.
func IsOperatorSession(id dirlock.SessionID) bool {
	return strings.HasPrefix(string(id), operatorPrefix)
}

package volume

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
)

// The tests of this file run in a testing/synctest bubble: the Set's
// clock is the bubble's, so the checks' intervals, gaps and timeouts
// pass as soon as every goroutine waits, and what the tests say of time
// is exact. Disks fail through Config.TestingKnobs.Fault.

// faults is the fault seam of a Set's volumes: by data directory, the
// I/O that fails, and whether the disk hangs.
type faults struct {
	mu sync.Mutex
	// changed is closed and replaced whenever an I/O is seen or ends.
	changed chan struct{}
	fail    map[faultKey]error
	once    map[faultKey]error
	// hung holds, for a disk that hangs, a channel closed to let it go.
	hung    map[string]chan struct{}
	seen    map[faultKey]int
	blocked map[faultKey]int
}

type faultKey struct {
	dir string
	op  blockstore.Op
}

func newFaults() *faults {
	return &faults{changed: make(chan struct{}), fail: map[faultKey]error{}, once: map[faultKey]error{},
		hung: map[string]chan struct{}{}, seen: map[faultKey]int{}, blocked: map[faultKey]int{}}
}

// fault is the TestingKnobs.Fault.
func (f *faults) fault(dir string, op blockstore.Op, _ string) error {
	k := faultKey{dir, op}
	f.mu.Lock()
	f.seen[k]++
	err := f.fail[k]
	if e, ok := f.once[k]; ok {
		err = e
		delete(f.once, k)
	}
	hung := f.hung[dir]
	if hung != nil {
		f.blocked[k]++
	}
	f.bumpLocked()
	f.mu.Unlock()
	if hung != nil {
		<-hung
		f.mu.Lock()
		f.blocked[k]--
		f.bumpLocked()
		f.mu.Unlock()
	}
	return err
}

func (f *faults) bumpLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// set makes every op on dir fail with err (nil: succeed again).
func (f *faults) set(dir string, err error, ops ...blockstore.Op) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, op := range ops {
		f.fail[faultKey{dir, op}] = err
	}
}

// failNext makes the next op on dir fail with err.
func (f *faults) failNext(dir string, op blockstore.Op, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.once[faultKey{dir, op}] = err
}

// hang makes every I/O on dir block until the returned function is
// called (at the latest by the test's cleanup, before the Set closes).
func (f *faults) hang(t *testing.T, dir string) (release func()) {
	c := make(chan struct{})
	f.mu.Lock()
	f.hung[dir] = c
	f.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			f.mu.Lock()
			delete(f.hung, dir)
			f.mu.Unlock()
			close(c)
		})
	}
	t.Cleanup(release)
	return release
}

// count returns how many ops of kind op dir has seen.
func (f *faults) count(dir string, op blockstore.Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[faultKey{dir, op}]
}

// wait waits until cond (called with f.mu held) holds, failing the test
// if it does not within d of the bubble's time.
func (f *faults) wait(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		ok, changed := cond(), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

// waitDone waits for v to go out of service, failing the test if it does
// not within d of the bubble's time; it returns the time it took.
func waitDone(t *testing.T, v *Volume, d time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-v.Done():
		return time.Since(start)
	case <-time.After(d):
		t.Fatalf("%s: volume %s still in service %v later", what, v.Dir(), d)
		return 0
	}
}

// alike gives every volume the same large disk, so each takes its share
// of new replicas and a full one has room again once its errors stop.
func alike(string) (int64, int64) { return 1 << 40, 1 << 39 }

// createOn creates, from block id on, replicas until one lands on volume
// vol, and returns its id (the others stay, empty).
func createOn(t *testing.T, s *Set, vol int, id blockstore.BlockID) blockstore.BlockID {
	t.Helper()
	for ; ; id++ {
		require.NoError(t, s.Create(context.Background(), id))
		if s.Volume(id) == vol {
			return id
		}
	}
}

// sealedOn writes a sealed replica of some block from id on, on volume
// vol, and returns its id.
func sealedOn(t *testing.T, s *Set, vol int, id blockstore.BlockID) blockstore.BlockID {
	t.Helper()
	id = createOn(t, s, vol, id)
	data := []byte("data")
	_, err := s.Write(blockstore.Packet{BlockID: id, Seq: 1, Data: data, CRC32C: blockstore.Checksum(data), Last: true})
	require.NoError(t, err)
	return id
}

// readBack reads a replica sealedOn wrote.
func readBack(t *testing.T, s *Set, id blockstore.BlockID) {
	t.Helper()
	got := make([]byte, 4)
	_, err := s.ReadAt(id, got, 0)
	require.NoError(t, err)
	require.Equal(t, "data", string(got))
}

func packetOf(id blockstore.BlockID, seq, off int64, data string, sync bool) blockstore.Packet {
	return blockstore.Packet{BlockID: id, Seq: seq, Offset: off, Data: []byte(data), CRC32C: blockstore.Checksum([]byte(data)), Sync: sync}
}

// TestHungDiskGoesOutOfService: a disk that stalls instead of failing.
// Volume 0's disk hangs under a reader, and its check hangs too; the
// other volumes serve on and are checked meanwhile (volume 1's disk
// fails and goes out of service while volume 0's check hangs); volume 0
// goes out of service once its check has run past the check timeout,
// and its reader is let go with ErrVolumeFailed (the SDK then reads
// another replica). Before, every volume was checked on one goroutine
// with no timeout: one hung check stopped the checks of every volume,
// and the reader waited for as long as the disk did.
func TestHungDiskGoesOutOfService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFaults()
		d := dirs(t, 3)
		s := open(t, Config{Dirs: d, DiskSpace: alike, TestingKnobs: TestingKnobs{Fault: f.fault}})
		vols := s.Volumes()
		var held [3]blockstore.BlockID
		for i := range held {
			held[i] = sealedOn(t, s, i, blockstore.BlockID(100*(i+1)))
		}
		toWrite := createOn(t, s, 1, 1000)

		hungAt := time.Now()
		f.hang(t, d[0])
		read := make(chan error, 1)
		go func() {
			_, err := s.ReadAt(held[0], make([]byte, 4), 0)
			read <- err
		}()
		f.wait(t, time.Minute, "the read waits on the hung disk", func() bool { return f.blocked[faultKey{d[0], blockstore.OpRead}] == 1 })
		s.Suspect(vols[0])
		f.wait(t, time.Minute, "a check of the hung disk hangs", func() bool { return f.blocked[faultKey{d[0], blockstore.OpCheck}] == 1 })

		// The other volumes serve, and are checked: a reader that meets an
		// error on volume 2 waits for volume 2's check alone (it passes:
		// the replica alone is unreadable), and volume 1's disk fails.
		readBack(t, s, held[1])
		readBack(t, s, held[2])
		f.failNext(d[2], blockstore.OpRead, syscall.EIO)
		_, err := s.ReadAt(held[2], make([]byte, 4), 0)
		require.ErrorIs(t, err, blockstore.ErrCorrupt)
		f.set(d[1], syscall.EIO, blockstore.OpWrite, blockstore.OpCheck)
		_, err = s.Write(packetOf(toWrite, 1, 0, "x", false))
		require.ErrorIs(t, err, syscall.EIO)
		took := waitDone(t, vols[1], 2*time.Minute, "volume 1's disk failed while volume 0's check hangs")
		t.Logf("volume 1 out of service %v after its error, volume 0's check hanging", took)

		waitDone(t, vols[0], 5*time.Minute, "volume 0's disk hangs")
		t.Logf("hung volume 0 out of service %v after its disk hung (check timeout %v)", time.Since(hungAt), DefaultCheckTimeout)
		select {
		case err := <-read:
			require.ErrorIs(t, err, ErrVolumeFailed)
		case <-time.After(time.Minute):
			t.Fatal("the reader of the hung disk still waits, its volume out of service")
		}
		st := s.Status()
		require.Equal(t, Failed, st[0].State)
		require.Contains(t, st[0].Reason, "did not finish within")
		require.Equal(t, Failed, st[1].State)
		require.Equal(t, Healthy, st[2].State)
		sealedOn(t, s, 2, 3000)
		for id := blockstore.BlockID(2000); id < 2010; id++ {
			require.NoError(t, s.Create(context.Background(), id))
			require.Equal(t, 2, s.Volume(id), "the healthy volume takes every new replica")
		}
	})
}

// TestHungReadAloneIsNoticed: a disk that hangs under a reader, with no
// error and no other I/O to ask for a check: the stalled read has the
// volume checked, the check times out, and the reader is let go with
// ErrVolumeFailed, well before the check of every minute.
func TestHungReadAloneIsNoticed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFaults()
		d := dirs(t, 2)
		s := open(t, Config{Dirs: d, DiskSpace: alike, TestingKnobs: TestingKnobs{Fault: f.fault}})
		held := sealedOn(t, s, 0, 1)
		other := sealedOn(t, s, 1, 100)
		f.hang(t, d[0])
		start := time.Now()
		_, err := s.ReadAt(held, make([]byte, 4), 0)
		require.ErrorIs(t, err, ErrVolumeFailed)
		t.Logf("the reader of the hung disk let go after %v (stall after %v, check timeout %v)", time.Since(start), stallAfter, DefaultCheckTimeout)
		require.Less(t, time.Since(start), DefaultCheckInterval, "noticed before the check of every minute")
		require.Equal(t, Failed, s.Status()[0].State)
		readBack(t, s, other)
	})
}

// TestErrorAfterPassingCheck: an error met right after a check passed is
// not answered with that check's result: it has the volume checked again.
// Before, a check less than a second old answered for it, and the error
// was then forgotten until the check of every minute; a reader was told
// the replica was corrupt while the disk under it had failed.
func TestErrorAfterPassingCheck(t *testing.T) {
	// setup opens two volumes and has volume 0 checked after a read error
	// it passes (the replica alone is unreadable), then fails its disk.
	setup := func(t *testing.T) (*faults, *Set, blockstore.BlockID, blockstore.BlockID) {
		f := newFaults()
		d := dirs(t, 2)
		s := open(t, Config{Dirs: d, DiskSpace: alike, TestingKnobs: TestingKnobs{Fault: f.fault}})
		held := sealedOn(t, s, 0, 1)
		toWrite := createOn(t, s, 0, 100)
		f.failNext(d[0], blockstore.OpRead, syscall.EIO)
		_, err := s.ReadAt(held, make([]byte, 4), 0)
		require.ErrorIs(t, err, blockstore.ErrCorrupt, "the volume passes its check")
		require.Equal(t, 1, f.count(d[0], blockstore.OpCheck))
		// The disk fails now, with no time passed since the check.
		f.set(d[0], syscall.EIO, blockstore.OpRead, blockstore.OpWrite, blockstore.OpCheck)
		return f, s, held, toWrite
	}
	t.Run("write", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, s, _, toWrite := setup(t)
			_, err := s.Write(packetOf(toWrite, 1, 0, "x", false))
			require.ErrorIs(t, err, syscall.EIO)
			took := waitDone(t, s.Volumes()[0], DefaultCheckInterval/2, "a write error after a passing check")
			t.Logf("out of service %v after the write error", took)
		})
	})
	t.Run("read", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, s, held, _ := setup(t)
			_, err := s.ReadAt(held, make([]byte, 4), 0)
			require.ErrorIs(t, err, ErrVolumeFailed, "the disk under the replica failed: it is not the replica that is corrupt")
			require.Equal(t, Failed, s.Status()[0].State)
		})
	})
}

// TestMetaLogOutOfSpace: ENOSPC on a volume's meta log has the volume
// checked; the disk being full, it is full, not failed: it serves what
// it holds, takes no new replica, and is healthy again once space is
// freed.
func TestMetaLogOutOfSpace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFaults()
		d := dirs(t, 1)
		changes := make(chan struct{}, 16)
		s := open(t, Config{Dirs: d, DiskSpace: alike, TestingKnobs: TestingKnobs{Fault: f.fault},
			OnChange: func() { changes <- struct{}{} }})
		held := sealedOn(t, s, 0, 1)
		require.NoError(t, s.Create(context.Background(), 2))

		f.set(d[0], syscall.ENOSPC, blockstore.OpLogWrite, blockstore.OpCheck)
		_, err := s.Write(packetOf(2, 1, 0, "synced", true))
		require.ErrorIs(t, err, syscall.ENOSPC)
		require.ErrorContains(t, err, "meta log")
		<-changes
		// Checked, and checked again while full: full each time, never failed.
		f.wait(t, time.Minute, "two checks of the full volume", func() bool { return f.seen[faultKey{d[0], blockstore.OpCheck}] >= 2 })
		synctest.Wait()
		st := s.Status()[0]
		require.Equal(t, Full, st.State, "%+v", st)
		require.Contains(t, st.Reason, "no space left on device")
		require.ErrorIs(t, s.Create(context.Background(), 3), syscall.ENOSPC)
		readBack(t, s, held)

		freed := time.Now()
		f.set(d[0], nil, blockstore.OpLogWrite, blockstore.OpCheck)
		select {
		case <-changes:
		case <-time.After(time.Minute):
			t.Fatal("the volume is not back a minute after space was freed")
		}
		t.Logf("healthy again %v after space was freed", time.Since(freed))
		require.Equal(t, Healthy, s.Status()[0].State)
		require.NoError(t, s.Create(context.Background(), 3))
		_, err = s.Write(packetOf(3, 1, 0, "synced", true))
		require.NoError(t, err)
	})
}

// TestSyncErrorsAreChecked: a failed fdatasync has the volume checked. A
// data file's (the disk passes its check) leaves the volume in service;
// the meta log's (the store persists nothing more) takes it out of
// service.
func TestSyncErrorsAreChecked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFaults()
		d := dirs(t, 2)
		s := open(t, Config{Dirs: d, DiskSpace: alike, TestingKnobs: TestingKnobs{Fault: f.fault}})
		id := createOn(t, s, 0, 1)

		f.failNext(d[0], blockstore.OpSync, syscall.EIO)
		_, err := s.Write(packetOf(id, 1, 0, "data", true))
		require.ErrorIs(t, err, syscall.EIO)
		f.wait(t, time.Minute, "a check after the data file's fsync failed", func() bool { return f.seen[faultKey{d[0], blockstore.OpCheck}] == 1 })
		synctest.Wait()
		require.Equal(t, Healthy, s.Status()[0].State, "the disk passed its check")

		id = createOn(t, s, 0, 100)
		f.failNext(d[0], blockstore.OpLogSync, syscall.EIO)
		_, err = s.Write(packetOf(id, 1, 0, "data", true))
		require.ErrorIs(t, err, syscall.EIO)
		took := waitDone(t, s.Volumes()[0], DefaultCheckInterval/2, "the meta log's fsync failed")
		t.Logf("out of service %v after the meta log's fsync failed", took)
		st := s.Status()[0]
		require.Equal(t, Failed, st.State)
		require.Contains(t, st.Reason, "meta log")
	})
}

package fileclose

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/nameserver/blockmap"
	"github.com/bfs-go/bfs/nameserver/namespace"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// storeFiles is the Files seam over a real namespace.Store, as the
// nameserver wires it (its commands applied in order, as a log would).
type storeFiles struct{ *namespace.Store }

// applyMu picks the next log index and applies at it, one command at a
// time.
var applyMu sync.Mutex

func apply(ns *namespace.Store, cmd *bfspb.Command) (*namespace.Result, error) {
	applyMu.Lock()
	defer applyMu.Unlock()
	return ns.Apply(ns.AppliedIndex()+1, cmd)
}

func (f storeFiles) CloseFile(cmd *bfspb.CloseFileCmd) error {
	_, err := apply(f.Store, &bfspb.Command{TimeNs: 1, Op: &bfspb.Command_CloseFile{CloseFile: cmd}})
	return err
}

// openNamespace opens a formatted namespace in a test directory.
func openNamespace(t *testing.T) *namespace.Store {
	t.Helper()
	ns, err := namespace.Open(namespace.Options{Dir: t.TempDir()})
	require.NoError(t, err)
	_, err = apply(ns, &bfspb.Command{Op: &bfspb.Command_Format{Format: &bfspb.FormatCmd{ClusterId: "test"}}})
	require.NoError(t, err)
	return ns
}

// openSession stores session id.
func openSession(t *testing.T, ns *namespace.Store, id string) {
	t.Helper()
	_, err := apply(ns, &bfspb.Command{Op: &bfspb.Command_OpenSession{OpenSession: &bfspb.OpenSessionCmd{
		Session: &bfspb.SessionRecord{SessionId: id, Holder: "test", TtlMs: 1000}}}})
	require.NoError(t, err)
}

// replicaState is a fake replica.
type replicaState struct {
	size   int64
	sealed bool
}

// fakeChunkservers holds replicas by address and block. Addresses in
// down refuse every call.
type fakeChunkservers struct {
	mu       sync.Mutex
	replicas map[string]map[int64]*replicaState
	down     map[string]bool
	seals    map[string]int
	// onSeal, if set, is called (without mu) after a replica was sealed:
	// the chunkserver's BlockReceived.
	onSeal func(addr string, block, size int64)
}

func newFakeChunkservers() *fakeChunkservers {
	return &fakeChunkservers{replicas: map[string]map[int64]*replicaState{}, down: map[string]bool{}, seals: map[string]int{}}
}

var errDown = errors.New("chunkserver down")

func (f *fakeChunkservers) put(addr string, block, size int64, sealed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.replicas[addr] == nil {
		f.replicas[addr] = map[int64]*replicaState{}
	}
	f.replicas[addr][block] = &replicaState{size: size, sealed: sealed}
}

func (f *fakeChunkservers) get(addr string, block int64) (replicaState, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.replicas[addr][block]
	if !ok {
		return replicaState{}, false
	}
	return *r, true
}

func (f *fakeChunkservers) Seal(_ context.Context, addr string, block int64) error {
	f.mu.Lock()
	f.seals[addr]++
	if f.down[addr] {
		f.mu.Unlock()
		return errDown
	}
	r, ok := f.replicas[addr][block]
	if !ok {
		r = &replicaState{}
		if f.replicas[addr] == nil {
			f.replicas[addr] = map[int64]*replicaState{}
		}
		f.replicas[addr][block] = r
	}
	r.sealed = true
	size, onSeal := r.size, f.onSeal
	f.mu.Unlock()
	if onSeal != nil {
		onSeal(addr, block, size)
	}
	return nil
}

func (f *fakeChunkservers) Truncate(_ context.Context, addr string, block, size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.replicas[addr][block]
	switch {
	case f.down[addr]:
		return errDown
	case !ok || !r.sealed:
		return errors.New("no sealed replica")
	}
	r.size = min(r.size, size)
	return nil
}

func (f *fakeChunkservers) Replica(_ context.Context, addr string, block int64) (ReplicaInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[addr] {
		return ReplicaInfo{}, errDown
	}
	r, ok := f.replicas[addr][block]
	if !ok {
		return ReplicaInfo{}, nil
	}
	return ReplicaInfo{Found: true, Sealed: r.sealed, Size: r.size}, nil
}

func (f *fakeChunkservers) Delete(addr string, blocks []int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range blocks {
		delete(f.replicas[addr], b)
	}
}

// testCloser is a Closer over a real namespace in a temporary directory,
// a block map and fake chunkservers, with a fake clock.
type testCloser struct {
	*Closer
	ns     *namespace.Store
	blocks *blockmap.Map
	cs     *fakeChunkservers
	clock  *clock.Fake
	// sessions are the sessions stored so far.
	sessions map[string]struct{}
}

func newTestCloser(t *testing.T, beforeClose func(entry uint64)) *testCloser {
	t.Helper()
	ns := openNamespace(t)
	var err error
	fc := clock.NewFake(time.Unix(1000, 0))
	tc := &testCloser{ns: ns, blocks: blockmap.New(fc.Now()), cs: newFakeChunkservers(), clock: fc, sessions: map[string]struct{}{}}
	tc.Closer, err = New(Config{
		Files: storeFiles{ns}, Replicas: tc.blocks, Chunkservers: tc.cs, Clock: fc,
		DeadTimeout: 10 * time.Second, SealConcurrency: 4, BeforeClose: beforeClose,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		tc.Close()
		ns.Close()
	})
	return tc
}

// createOpen creates path open for write by session, with a block on
// replicas; it returns the file's entry id and the block.
func (tc *testCloser) createOpen(t *testing.T, path, session string, replicas ...string) (uint64, int64) {
	t.Helper()
	if _, ok := tc.sessions[session]; !ok {
		openSession(t, tc.ns, session)
		tc.sessions[session] = struct{}{}
	}
	_, err := apply(tc.ns, &bfspb.Command{Op: &bfspb.Command_Create{Create: &bfspb.CreateCmd{
		Path: path, SessionId: session, OpenForWrite: true}}})
	require.NoError(t, err)
	res, err := apply(tc.ns, &bfspb.Command{Op: &bfspb.Command_AddBlock{AddBlock: &bfspb.AddBlockCmd{
		Path: path, SessionId: session, Block: &bfspb.BlockMeta{Version: 1, WriteSet: replicas}}}})
	require.NoError(t, err)
	block := res.Info.Blocks[0].Id
	tc.NoteOpen(res.Info.EntryId, res.Info)
	for _, addr := range replicas {
		tc.blocks.Register(addr, blockmap.Usage{}, tc.clock.Now())
		tc.cs.put(addr, block, 0, false)
	}
	return res.Info.EntryId, block
}

func waitDone(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal(what)
	}
}

// TestCloseStartsOverWhenABlockIsAdded: lease recovery looks at a file
// that has no block yet and decides its close at once, but the writer's
// AddBlock (checked before its session ended) commits in between. The
// close must not be persisted over the new block, leaving it unsealed
// and writable forever: it starts over, seals the new block, agrees on
// its length, and only then are the first close's waiters woken.
func TestCloseStartsOverWhenABlockIsAdded(t *testing.T) {
	const replica = "cs1"
	var tc *testCloser
	var once sync.Once
	var block int64
	added := make(chan error, 1)
	tc = newTestCloser(t, func(uint64) {
		once.Do(func() {
			res, err := apply(tc.ns, &bfspb.Command{Op: &bfspb.Command_AddBlock{AddBlock: &bfspb.AddBlockCmd{
				Path: "/f", SessionId: "gone", Block: &bfspb.BlockMeta{WriteSet: []string{replica}}}}})
			if err == nil {
				block = res.Info.Blocks[0].Id
			}
			added <- err
		})
	})
	tc.cs.down[replica] = true // never answers: the test reports for it
	openSession(t, tc.ns, "gone")
	res, err := apply(tc.ns, &bfspb.Command{Op: &bfspb.Command_Create{Create: &bfspb.CreateCmd{
		Path: "/f", SessionId: "gone", OpenForWrite: true}}})
	require.NoError(t, err)
	entry := res.Info.EntryId

	done := tc.Finish(entry)
	require.NoError(t, <-added)
	require.Eventually(t, func() bool { return len(tc.Pending(entry)[entry]) == 1 }, 10*time.Second, time.Millisecond,
		"the close did not start over, waiting for the new block's replica")
	select {
	case <-done:
		t.Fatal("the file was closed before its new block was sealed")
	default:
	}
	tc.Received(replica, block, 10)
	waitDone(t, done, "the first close's waiters were not woken when the file closed")
	info, err := tc.ns.Stat("/f")
	require.NoError(t, err)
	require.Empty(t, info.WriterSession)
	require.Equal(t, block, info.Blocks[0].Id)
	require.EqualValues(t, 10, info.Size)
}

// TestCloseFileSettlesEveryReplica: CloseFile (what a cleaning waits on)
// seals every replica, closes the file at the agreed length, and returns
// only once every replica holds that length, the longer one cut (I5).
func TestCloseFileSettlesEveryReplica(t *testing.T) {
	tc := newTestCloser(t, nil)
	tc.cs.onSeal = func(addr string, block, size int64) { tc.Received(addr, block, size) }
	entry, block := tc.createOpen(t, "/f", "w", "cs1", "cs2", "cs3")
	tc.cs.put("cs1", block, 100, false)
	tc.cs.put("cs2", block, 100, false)
	tc.cs.put("cs3", block, 160, false)

	truncated, err := tc.CloseFile(context.Background(), entry)
	require.NoError(t, err)
	require.EqualValues(t, 60, truncated)
	info, err := tc.ns.Stat("/f")
	require.NoError(t, err)
	require.Empty(t, info.WriterSession)
	require.EqualValues(t, 100, info.Size)
	for _, addr := range []string{"cs1", "cs2", "cs3"} {
		r, ok := tc.cs.get(addr, block)
		require.True(t, ok, addr)
		require.Equal(t, replicaState{size: 100, sealed: true}, r, "replica on %s when CloseFile returned", addr)
	}
}

// TestCloseFileEndsWithoutADeadChunkserver: a replica whose chunkserver
// is declared dead is not waited for (I7): once the dead timeout has
// passed, Recheck closes the file with the replicas that reported.
func TestCloseFileEndsWithoutADeadChunkserver(t *testing.T) {
	tc := newTestCloser(t, nil)
	tc.cs.onSeal = func(addr string, block, size int64) { tc.Received(addr, block, size) }
	entry, block := tc.createOpen(t, "/f", "w", "cs1", "cs2", "cs3")
	for _, addr := range []string{"cs1", "cs2", "cs3"} {
		tc.cs.put(addr, block, 50, false)
	}
	tc.cs.mu.Lock()
	tc.cs.down["cs2"] = true
	tc.cs.mu.Unlock()

	closed := make(chan error, 1)
	go func() {
		_, err := tc.CloseFile(context.Background(), entry)
		closed <- err
	}()
	require.Eventually(t, func() bool { return len(tc.Pending(entry)[entry]) == 1 }, 10*time.Second, time.Millisecond)
	require.Equal(t, []string{"cs2"}, tc.Pending(entry)[entry])
	for range 11 { // cs1 and cs3 heartbeat, cs2 is silent
		tc.clock.Advance(time.Second)
		for _, s := range tc.blocks.Servers() {
			if s.Addr != "cs2" {
				tc.blocks.Heartbeat(s.ID, s.Addr, blockmap.Usage{}, tc.clock.Now())
			}
		}
	}
	tc.blocks.Expire(tc.clock.Now(), 10*time.Second)
	tc.Recheck()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the close still waits for the dead chunkserver")
	}
	info, err := tc.ns.Stat("/f")
	require.NoError(t, err)
	require.Empty(t, info.WriterSession)
	require.EqualValues(t, 50, info.Size)
	require.Equal(t, []string{"cs1", "cs3"}, info.Blocks[0].WriteSet, "the dead replica is dropped from the block")
}

// TestClosedRefusesWork: once closed, a Closer starts nothing, and a
// cleaning's CloseFile gives up with its context.
func TestClosedRefusesWork(t *testing.T) {
	tc := newTestCloser(t, nil)
	entry, _ := tc.createOpen(t, "/f", "w", "cs1")
	tc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := tc.CloseFile(ctx, entry)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	tc.cs.mu.Lock()
	defer tc.cs.mu.Unlock()
	require.Zero(t, tc.cs.seals["cs1"], "a closed Closer sent a seal")
}

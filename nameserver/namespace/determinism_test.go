package namespace

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestReplayIsDeterministic applies one random command log (every kind
// of command, a few thousand, many of them failing) to a store, and then
// to a second store that restarts twice on the way, and to a third
// restored from a checkpoint of the first taken part way and fed the
// rest: all three end byte-identical, with the same ids, epochs, locks
// and open files in memory, and every command answers the same on each.
func TestReplayIsDeterministic(t *testing.T) {
	const n, snapshotAt = 3000, 1100
	g := newLogGen(t, rand.New(rand.NewPCG(19, 2026)), t.TempDir())
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	var ckptIndex uint64
	var atCheckpoint []kv
	for i := range n {
		switch i {
		case snapshotAt:
			var err error
			ckptIndex, err = g.s.Checkpoint(ckpt)
			require.NoError(t, err)
			atCheckpoint = dump(t, g.s)
		case 2 * n / 3:
			g.restart()
		}
		g.step()
	}
	g.report()
	live := g.s

	// A replica applying the log, restarting twice; after each restart it
	// is fed the log from the start, as a node whose applied index is
	// behind its log: what it applied already is refused.
	dir := t.TempDir()
	replica := openEmpty(t, dir)
	restarts := map[uint64]bool{g.log.entries[n/3].index: true, g.log.entries[n/2].index: true}
	for i := 0; i < len(g.log.entries); i++ {
		e := g.log.entries[i]
		if restarts[e.index] {
			delete(restarts, e.index)
			require.NoError(t, replica.Close())
			replica = openEmpty(t, dir)
			i = -1
			continue
		}
		applied := replica.AppliedIndex()
		_, err := replica.Apply(e.index, proto.Clone(e.cmd).(*bfspb.Command))
		if e.index <= applied {
			require.ErrorIs(t, err, ErrApplied, "entry %d after a restart", e.index)
			continue
		}
		require.Equal(t, e.outcome, outcome(err), "entry %d: %v", e.index, e.cmd)
	}
	requireSameState(t, live, replica)

	// A replica restored from the checkpoint, then fed what follows it.
	restored := openEmpty(t, t.TempDir())
	require.NoError(t, restored.Restore(ckpt))
	require.Equal(t, ckptIndex, restored.AppliedIndex())
	require.Empty(t, diffState(atCheckpoint, dump(t, restored)))
	g.log.replay(t, restored, ckptIndex)
	requireSameState(t, live, restored)
}

// logGen makes a random command log, applying each command to s as it
// goes: what s answers chooses some of what follows (the epochs a fence
// or an unlock names, the entries and blocks a close names), so that
// enough commands apply among those that fail.
type logGen struct {
	t     *testing.T
	rng   *rand.Rand
	dir   string
	s     *Store
	log   cmdLog
	now   int64
	stats map[string]*[2]int // by kind: applied, failed
}

func newLogGen(t *testing.T, rng *rand.Rand, dir string) *logGen {
	g := &logGen{t: t, rng: rng, dir: dir, s: openEmpty(t, dir), stats: map[string]*[2]int{}}
	g.apply(&bfspb.FormatCmd{ClusterId: "determinism"})
	return g
}

// restart closes the store and opens it again on its directory.
func (g *logGen) restart() {
	require.NoError(g.t, g.s.Close())
	g.s = openEmpty(g.t, g.dir)
}

func (g *logGen) apply(op proto.Message) {
	g.now += 1 + g.rng.Int64N(1000)
	cmd := cmdOf(g.now, op)
	if g.rng.IntN(10) == 0 {
		cmd.Fences = g.fences()
	}
	_, err := g.log.apply(g.s, cmd)
	require.False(g.t, IsStorageError(err), "%v: %v", cmd, err)
	kind := string(op.ProtoReflect().Descriptor().Name())
	if g.stats[kind] == nil {
		g.stats[kind] = &[2]int{}
	}
	if err == nil {
		g.stats[kind][0]++
	} else {
		g.stats[kind][1]++
	}
}

// report logs what applied and what failed, and fails if a kind of
// command never applied: the log would not test it.
func (g *logGen) report() {
	var kinds []string
	for k := range g.stats {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	failed := 0
	for _, k := range kinds {
		st := g.stats[k]
		g.t.Logf("%-18s applied %4d, failed %4d", k, st[0], st[1])
		failed += st[1]
	}
	for _, k := range kinds {
		require.NotZero(g.t, g.stats[k][0], "no %s applied", k)
	}
	require.Len(g.t, kinds, opOneof.Fields().Len(), "every kind of command is in the log")
	require.Greater(g.t, failed, len(g.log.entries)/5, "many commands fail")
}

var genNames = []string{"a", "b", "c"}

func (g *logGen) path() string {
	parts := make([]string, 1+g.rng.IntN(3))
	for i := range parts {
		parts[i] = genNames[g.rng.IntN(len(genNames))]
	}
	return "/" + strings.Join(parts, "/")
}

// entry is a path the store has (dirs: a directory), most of the time;
// else a random one.
func (g *logGen) entry(dirs bool) string {
	var found []string
	require.NoError(g.t, g.s.Walk("/", "", func(p string, info *bfspb.FileInfo) bool {
		if p != "/" && (!dirs || info.Type == bfspb.FileType_FILE_TYPE_DIR) {
			found = append(found, p)
		}
		return true
	}))
	if len(found) == 0 || g.rng.IntN(4) == 0 {
		return g.path()
	}
	return found[g.rng.IntN(len(found))]
}

// newPath is a new name in a directory the store has, most of the time.
func (g *logGen) newPath() string {
	if g.rng.IntN(4) == 0 {
		return g.path()
	}
	dir := "/"
	if g.rng.IntN(3) > 0 {
		dir = g.entry(true)
	}
	if strings.Count(dir, "/") >= 4 {
		return g.path()
	}
	return strings.TrimSuffix(dir, "/") + "/" + genNames[g.rng.IntN(len(genNames))]
}

// session is a live session of the store most of the time, else any of
// s0 to s3.
func (g *logGen) session() string {
	live, err := g.s.Sessions()
	require.NoError(g.t, err)
	if len(live) == 0 || g.rng.IntN(5) == 0 {
		return fmt.Sprintf("s%d", g.rng.IntN(4))
	}
	return live[g.rng.IntN(len(live))].SessionId
}

// maybeSession is a session, or none a third of the time.
func (g *logGen) maybeSession() string {
	if g.rng.IntN(3) == 0 {
		return ""
	}
	return g.session()
}

func (g *logGen) addrs() []string {
	out := []string{fmt.Sprintf("cs%d", g.rng.IntN(5))}
	for g.rng.IntN(2) == 0 && len(out) < 3 {
		out = append(out, fmt.Sprintf("cs%d", g.rng.IntN(5)))
	}
	return out
}

func (g *logGen) pick(vals ...uint32) uint32 { return vals[g.rng.IntN(len(vals))] }

// fences names locks of the store, at their epochs or at one off.
func (g *logGen) fences() []*bfspb.Fence {
	locks := g.s.Locks().List("/", false, 0)
	if len(locks) == 0 {
		return []*bfspb.Fence{{Path: g.path(), Epoch: 1 + g.rng.Uint64N(5)}}
	}
	l := locks[g.rng.IntN(len(locks))]
	return []*bfspb.Fence{{Path: l.Path, Epoch: uint64(l.Epoch) + g.rng.Uint64N(2)}}
}

// writing picks a file open for write in the store and its writer
// (most of the time; else a random path and session).
func (g *logGen) writing() (path, session string) {
	open, err := g.s.OpenFiles("")
	require.NoError(g.t, err)
	if len(open) == 0 || g.rng.IntN(4) == 0 {
		return g.path(), g.session()
	}
	f := open[g.rng.IntN(len(open))]
	path, _, err = g.s.PathOf(f.EntryID)
	require.NoError(g.t, err)
	return path, f.Session
}

// file reads what the store has at path: its entry id and last block
// (zeros if nothing).
func (g *logGen) file(path string) (entry uint64, block int64) {
	info, err := g.s.Stat(path)
	if err != nil {
		return g.rng.Uint64N(50), 0
	}
	if blk := lastBlock(info); blk != nil {
		block = blk.Id
	}
	return info.EntryId, block
}

// step applies one random command.
func (g *logGen) step() {
	r := g.rng
	switch r.IntN(26) {
	case 0, 1:
		g.apply(&bfspb.MkdirCmd{Path: g.newPath(), Parents: r.IntN(3) > 0, SessionId: g.maybeSession(), Mode: g.pick(0, 0, 0o700, 0o17777)})
	case 2, 3:
		g.apply(&bfspb.CreateCmd{Path: g.newPath(), Overwrite: r.IntN(4) == 0, SessionId: g.maybeSession(),
			OpenForWrite: r.IntN(2) == 0, Replication: g.pick(0, 0, 1, 3, 99), Mode: g.pick(0, 0o600)})
	case 4:
		g.apply(&bfspb.DeleteFileCmd{Path: g.entry(false), SessionId: g.maybeSession()})
	case 5:
		g.apply(&bfspb.DeleteDirCmd{Path: g.entry(true), Recursive: r.IntN(2) == 0, SessionId: g.maybeSession()})
	case 6:
		g.apply(&bfspb.RenameCmd{Src: g.entry(false), Dst: g.newPath(), SessionId: g.maybeSession()})
	case 7:
		g.apply(&bfspb.ChmodCmd{Path: g.entry(false), Mode: g.pick(0o600, 0o755, 0o17777), SessionId: g.maybeSession()})
	case 8:
		id := fmt.Sprintf("s%d", r.IntN(4))
		g.apply(&bfspb.OpenSessionCmd{Session: &bfspb.SessionRecord{SessionId: id, Holder: "h-" + id, TtlMs: 1000}})
	case 9:
		if r.IntN(2) == 0 {
			g.apply(&bfspb.CloseSessionCmd{SessionId: g.session()})
		}
	case 10:
		var id int64
		if r.IntN(10) == 0 {
			id = 1 + r.Int64N(100)
		}
		p, session := g.writing()
		g.apply(&bfspb.AddBlockCmd{Path: p, SessionId: session, Block: &bfspb.BlockMeta{Id: id, Version: 1, WriteSet: g.addrs()}})
	case 11:
		p, session := g.writing()
		_, block := g.file(p)
		g.apply(&bfspb.SyncBlockCmd{Path: p, SessionId: session, BlockId: block, Size: r.Int64N(1 << 20), Dropped: g.addrs()[:r.IntN(2)]})
	case 12:
		p, _ := g.writing()
		entry, block := g.file(p)
		g.apply(&bfspb.CloseFileCmd{Path: p, EntryId: entry, BlockId: block, BlockSize: r.Int64N(1 << 20), Dropped: g.addrs()[:r.IntN(2)]})
	case 13, 14:
		if r.IntN(5) == 0 {
			g.apply(&bfspb.LockDirCmd{Path: g.entry(true), Holder: "ops", Operator: true})
		} else {
			s := g.session()
			g.apply(&bfspb.LockDirCmd{Path: g.entry(true), SessionId: s, Holder: "h-" + s})
		}
	case 15, 21:
		g.unlock()
	case 16, 22:
		g.finishCleaning()
	case 17:
		g.apply(&bfspb.DrainCmd{Addresses: g.addrs(), Cancel: r.IntN(2) == 0})
	case 18:
		name := fmt.Sprintf("n%d", r.IntN(4))
		g.apply(&bfspb.MemberCmd{Remove: r.IntN(4) == 0, Member: &bfspb.Member{Name: name,
			RaftAddress: fmt.Sprintf("r%d:1", r.IntN(5)), ClientAddress: fmt.Sprintf("c%d:1", r.IntN(5))}})
	case 19:
		g.apply(&bfspb.FormatCmd{ClusterId: fmt.Sprintf("other-%d", r.IntN(10))})
	case 20:
		g.apply(&bfspb.ChunkserverCmd{Address: g.addrs()[0], Forget: r.IntN(3) == 0,
			Record: &bfspb.ChunkserverRecord{Host: fmt.Sprintf("h%d", r.IntN(3)), Dead: r.IntN(2) == 0,
				LastHeartbeatNs: g.now, Blocks: r.Int64N(100)}})
	case 23:
		// Ids at random: some not newer than the newest stored.
		secret := make([]byte, 32)
		for i := range secret {
			secret[i] = byte(r.IntN(256))
		}
		g.apply(&bfspb.BlockKeyCmd{Key: &bfspb.BlockKey{Id: 1 + r.Uint64N(40), Secret: secret, CreatedUnixNs: g.now}})
	default:
		g.apply(&bfspb.CreateCmd{Path: g.newPath(), SessionId: g.session(), OpenForWrite: true})
	}
}

// unlock unlocks a lock of the store (or a random path), by its holder
// or another session, forced or not, naming its epoch or not (or a
// wrong one).
func (g *logGen) unlock() {
	r := g.rng
	c := &bfspb.UnlockDirCmd{Path: g.entry(true), SessionId: g.session(), Force: r.IntN(2) == 0, Reason: "unlock"}
	if locks := g.s.Locks().List("/", false, 0); len(locks) > 0 && r.IntN(4) > 0 {
		l := locks[r.IntN(len(locks))]
		c.Path = l.Path
		if r.IntN(2) == 0 && !IsOperatorSession(l.Session) {
			c.SessionId = string(l.Session)
		}
		switch r.IntN(3) {
		case 0:
			c.Epoch = uint64(l.Epoch)
		case 1:
			c.Epoch = uint64(l.Epoch) + 1
		}
	}
	g.apply(c)
}

// finishCleaning ends a cleaning of the store (or names a random path),
// at its epoch or a wrong one.
func (g *logGen) finishCleaning() {
	r := g.rng
	cl, err := g.s.Cleanings()
	require.NoError(g.t, err)
	c := &bfspb.FinishCleaningCmd{Path: g.path(), EntryId: r.Uint64N(50), Epoch: 1 + r.Uint64N(20), BytesTruncated: r.Int64N(100)}
	if len(cl) > 0 && r.IntN(10) > 0 {
		x := cl[r.IntN(len(cl))]
		c.Path, c.EntryId, c.Epoch = x.Path, x.Dir.EntryId, x.Record.Epoch
		if r.IntN(5) == 0 {
			c.Epoch++
		}
	}
	g.apply(c)
}

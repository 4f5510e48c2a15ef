package namespace

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/dirlock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestTranscripts runs the stories in testdata against a real Store in a
// temporary directory. Every command that changes the state is applied
// at the next index of a command log kept by the harness, as a
// replicated log holds it (a command that fails takes an index too), so
// that replay can apply the same log to another store. Sessions are
// named by their ids, and each is its own holder. Run with -rewrite to
// regenerate the expected outputs after a deliberate change, and review
// the diff.
//
// Commands that change the state (each takes fence=(PATH:EPOCH,...), the
// fences of the request):
//
//	format [id=ID]                     the FormatCmd (id: "c1")
//	open-session S / close-session S
//	mkdir PATH [-p] [session=S] [mode=MODE]
//	create PATH [session=S] [open] [overwrite] [repl=N]
//	rm PATH [session=S]
//	rmdir PATH [-r] [session=S]
//	mv SRC DST [session=S]
//	chmod PATH MODE [session=S]
//	add-block PATH session=S [on=(cs1,...)]
//	sync-block PATH session=S size=N [drop=(cs1,...)]   of the file's block
//	close-file PATH [size=N] [drop=(cs1,...)]           the nameserver's close
//	lock PATH session=S | lock PATH operator [holder=H]
//	unlock PATH session=S [epoch=N] | unlock PATH force [epoch=N]
//	finish-cleaning PATH [epoch=N] [truncated=N]        epoch: the cleaning's
//	drain CS... [cancel]
//	member NAME raft=ADDR client=ADDR | member NAME remove
//
// Reads: ls PATH, stat PATH, locks, sessions, members, open-files,
// history PATH, state (cluster id, applied index, stored counters).
//
// The store and its log:
//
//	restart                 close the store and open it again on its directory
//	snapshot NAME           Checkpoint into a directory of its own
//	restore NAME            Restore the store from it; the log is the snapshot's again
//	                        (as when a replica installs a leader's snapshot)
//	crash-restoring         the store restarts as a crash in the middle of a restore leaves it
//	replay [from=NAME]      apply the log so far, at its indexes, to a new store
//	                        (restored from snapshot NAME first, then fed what
//	                        follows it) and compare it with this one, byte by byte
func TestTranscripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{t: t, dir: t.TempDir(), snapshots: map[string]snapshot{}}
		h.s = openEmpty(t, filepath.Join(h.dir, "store"))
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return h.do(d)
		})
	})
}

type harness struct {
	t         *testing.T
	dir       string
	s         *Store
	log       cmdLog
	now       int64
	snapshots map[string]snapshot
}

// snapshot is a checkpoint, and the log that led to it.
type snapshot struct {
	dir   string
	index uint64
	log   []logEntry
}

func (h *harness) do(d *datadriven.TestData) string {
	if op, show := h.command(d); op != nil {
		return h.apply(d, op, show)
	}
	switch d.Cmd {
	case "ls":
		return h.ls(d)
	case "stat":
		info, err := h.s.Stat(h.arg(d, 0))
		if err != nil {
			return "error: " + err.Error()
		}
		return describeEntry(info)
	case "locks":
		return h.locks()
	case "sessions":
		recs, err := h.s.Sessions()
		h.check(err)
		var out []string
		for _, r := range recs {
			out = append(out, r.SessionId)
		}
		return lines(out)
	case "members":
		var out []string
		for _, m := range h.s.Members() {
			out = append(out, fmt.Sprintf("%s raft=%s client=%s", m.Name, m.RaftAddress, m.ClientAddress))
		}
		return lines(out)
	case "open-files":
		return h.openFiles()
	case "history":
		return h.history(d)
	case "state":
		return h.state()
	case "restart":
		h.check(h.s.Close())
		h.s = openEmpty(h.t, filepath.Join(h.dir, "store"))
		return h.state()
	case "snapshot":
		name := h.arg(d, 0)
		dir := filepath.Join(h.dir, "snapshot-"+name)
		index, err := h.s.Checkpoint(dir)
		h.check(err)
		h.snapshots[name] = snapshot{dir: dir, index: index, log: slices.Clone(h.log.entries)}
		return fmt.Sprintf("index=%d", index)
	case "restore":
		snap := h.snapshot(d, h.arg(d, 0))
		if err := h.s.Restore(snap.dir); err != nil {
			return "error: " + err.Error()
		}
		h.log.entries = slices.Clone(snap.log)
		return h.state()
	case "crash-restoring":
		h.check(h.s.db.Set(keyRestoring, nil, pebble.Sync))
		h.check(h.s.Close())
		h.s = openEmpty(h.t, filepath.Join(h.dir, "store"))
		return h.state()
	case "replay":
		return h.replay(d)
	}
	d.Fatalf(h.t, "unknown command %s", d.Cmd)
	return ""
}

func (h *harness) check(err error) {
	h.t.Helper()
	if err != nil {
		h.t.Fatal(err)
	}
}

// arg is the i-th bare argument of d.
func (h *harness) arg(d *datadriven.TestData, i int) string {
	var bare []string
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 && (strings.HasPrefix(a.Key, "/") || !isFlag(a.Key)) {
			bare = append(bare, a.Key)
		}
	}
	if i >= len(bare) {
		d.Fatalf(h.t, "%s: argument %d missing", d.Cmd, i+1)
	}
	return bare[i]
}

// flags of the commands, never taken for a bare argument.
func isFlag(k string) bool {
	return slices.Contains([]string{"-p", "-r", "open", "overwrite", "operator", "force", "cancel", "remove"}, k)
}

func (h *harness) str(d *datadriven.TestData, key string) string {
	var v string
	d.MaybeScanArgs(h.t, key, &v)
	return v
}

func (h *harness) num(d *datadriven.TestData, key string) int64 {
	var v int64
	d.MaybeScanArgs(h.t, key, &v)
	return v
}

func (h *harness) list(d *datadriven.TestData, key string) []string {
	if a, ok := d.Arg(key); ok {
		return a.Vals
	}
	return nil
}

// command builds the op a state-changing command names, and how to print
// what it did (nil if d is no such command).
func (h *harness) command(d *datadriven.TestData) (proto.Message, func(*Result) string) {
	session := h.str(d, "session")
	ok := func(*Result) string { return "ok" }
	switch d.Cmd {
	case "format":
		return &bfspb.FormatCmd{ClusterId: cmp.Or(h.str(d, "id"), "c1")}, func(*Result) string { return "ok cluster=" + h.s.ClusterID() }
	case "open-session":
		s := h.arg(d, 0)
		return &bfspb.OpenSessionCmd{Session: &bfspb.SessionRecord{SessionId: s, Holder: s, TtlMs: 30_000}}, ok
	case "close-session":
		return &bfspb.CloseSessionCmd{SessionId: h.arg(d, 0)}, ok
	case "mkdir":
		mode, err := strconv.ParseUint(h.str(d, "mode"), 8, 32)
		if h.str(d, "mode") == "" {
			mode, err = 0, nil
		}
		h.check(err)
		return &bfspb.MkdirCmd{Path: h.arg(d, 0), Parents: d.HasArg("-p"), SessionId: session, Mode: uint32(mode)}, printID
	case "create":
		return &bfspb.CreateCmd{Path: h.arg(d, 0), SessionId: session, OpenForWrite: d.HasArg("open"),
			Overwrite: d.HasArg("overwrite"), Replication: uint32(h.num(d, "repl"))}, printCreate
	case "rm":
		return &bfspb.DeleteFileCmd{Path: h.arg(d, 0), SessionId: session}, printFreed
	case "rmdir":
		return &bfspb.DeleteDirCmd{Path: h.arg(d, 0), Recursive: d.HasArg("-r"), SessionId: session}, printFreed
	case "mv":
		return &bfspb.RenameCmd{Src: h.arg(d, 0), Dst: h.arg(d, 1), SessionId: session}, printFreed
	case "chmod":
		mode, err := strconv.ParseUint(h.arg(d, 1), 8, 32)
		h.check(err)
		return &bfspb.ChmodCmd{Path: h.arg(d, 0), Mode: uint32(mode), SessionId: session}, ok
	case "add-block":
		on := h.list(d, "on")
		if on == nil {
			on = []string{"cs1", "cs2", "cs3"}
		}
		return &bfspb.AddBlockCmd{Path: h.arg(d, 0), SessionId: session, Block: &bfspb.BlockMeta{Version: 1, WriteSet: on}}, printBlock
	case "sync-block":
		_, block := h.file(h.arg(d, 0))
		return &bfspb.SyncBlockCmd{Path: h.arg(d, 0), SessionId: session, BlockId: block, Size: h.num(d, "size"), Dropped: h.list(d, "drop")}, printBlock
	case "close-file":
		entry, block := h.file(h.arg(d, 0))
		return &bfspb.CloseFileCmd{Path: h.arg(d, 0), EntryId: entry, BlockId: block, BlockSize: h.num(d, "size"), Dropped: h.list(d, "drop")}, printBlock
	case "lock":
		if d.HasArg("operator") {
			return &bfspb.LockDirCmd{Path: h.arg(d, 0), Holder: cmp.Or(h.str(d, "holder"), "ops"), Operator: true}, printLock
		}
		return &bfspb.LockDirCmd{Path: h.arg(d, 0), SessionId: session, Holder: session}, printLock
	case "unlock":
		reason := "holder"
		if d.HasArg("force") {
			reason = "force"
		}
		return &bfspb.UnlockDirCmd{Path: h.arg(d, 0), SessionId: session, Force: d.HasArg("force"),
			Epoch: uint64(h.num(d, "epoch")), Reason: reason}, printLock
	case "finish-cleaning":
		return h.finishCleaning(d), printLock
	case "drain":
		var addrs []string
		for _, a := range d.CmdArgs {
			if a.Key != "cancel" && a.Key != "fence" {
				addrs = append(addrs, a.Key)
			}
		}
		return &bfspb.DrainCmd{Addresses: addrs, Cancel: d.HasArg("cancel")}, ok
	case "member":
		return &bfspb.MemberCmd{Remove: d.HasArg("remove"), Member: &bfspb.Member{Name: h.arg(d, 0),
			RaftAddress: h.str(d, "raft"), ClientAddress: h.str(d, "client")}}, ok
	}
	return nil, nil
}

// apply applies op at the next index of the log and prints what it did.
func (h *harness) apply(d *datadriven.TestData, op proto.Message, show func(*Result) string) string {
	h.now += 1000
	cmd := cmdOf(h.now, op)
	for _, f := range h.list(d, "fence") {
		p, e, _ := strings.Cut(f, ":")
		epoch, err := strconv.ParseUint(e, 10, 64)
		h.check(err)
		cmd.Fences = append(cmd.Fences, &bfspb.Fence{Path: p, Epoch: epoch})
	}
	res, err := h.log.apply(h.s, cmd)
	if err != nil {
		return "error: " + err.Error()
	}
	return show(res)
}

// file is the entry id and block id of the file at path (zeros if none).
func (h *harness) file(path string) (uint64, int64) {
	info, err := h.s.Stat(path)
	if err != nil {
		return 0, 0
	}
	if blk := lastBlock(info); blk != nil {
		return info.EntryId, blk.Id
	}
	return info.EntryId, 0
}

// finishCleaning ends the cleaning recorded for path, at its epoch
// unless epoch= says otherwise.
func (h *harness) finishCleaning(d *datadriven.TestData) *bfspb.FinishCleaningCmd {
	path := h.arg(d, 0)
	c := &bfspb.FinishCleaningCmd{Path: path, Epoch: uint64(h.num(d, "epoch")), BytesTruncated: h.num(d, "truncated")}
	if info, err := h.s.Stat(path); err == nil {
		c.EntryId = info.EntryId
	}
	if c.Epoch == 0 {
		cl, err := h.s.Cleanings()
		h.check(err)
		for _, x := range cl {
			if x.Path == path {
				c.Epoch = x.Record.Epoch
			}
		}
	}
	return c
}

func printID(res *Result) string { return fmt.Sprintf("ok id=%d", res.Info.EntryId) }

func printCreate(res *Result) string {
	s := printID(res)
	if w := res.Info.WriterSession; w != "" {
		s += " open by " + w
	}
	return s + printFreed(res)[2:]
}

func printFreed(res *Result) string {
	if len(res.Freed) == 0 {
		return "ok"
	}
	var ids []string
	for _, b := range res.Freed {
		ids = append(ids, strconv.FormatInt(b.Id, 10))
	}
	return "ok, freed block " + strings.Join(ids, ",")
}

func printBlock(res *Result) string {
	blk := lastBlock(res.Info)
	if blk == nil {
		return fmt.Sprintf("ok size=%d", res.Info.Size)
	}
	return fmt.Sprintf("ok block=%d on %s size=%d", blk.Id, strings.Join(blk.WriteSet, ","), res.Info.Size)
}

// printLock says the state a lock command left the directory in, what a
// cleaning waits for, and which locks ended.
func printLock(res *Result) string {
	l := res.Lock
	if l == nil {
		return "ok"
	}
	s := describeLock(*l)
	if c := res.Cleaning; c != nil && l.Status == dirlock.Cleaning {
		s += fmt.Sprintf(", waits for files %v", c.Files)
	}
	var ended []string
	for _, p := range res.RemovedLocks {
		if p != l.Path {
			ended = append(ended, p)
		}
	}
	if len(ended) > 0 {
		s += ", also unlocked " + strings.Join(ended, " ")
	}
	return s
}

func describeLock(l dirlock.Lock) string {
	s := l.Status.String()
	if l.Status == dirlock.Unlocked {
		return s + fmt.Sprintf(" (was epoch=%d)", l.Epoch)
	}
	if l.Holder != "" {
		s += " by " + l.Holder
	}
	return s + fmt.Sprintf(" epoch=%d", l.Epoch)
}

func describeEntry(info *bfspb.FileInfo) string {
	if info.Type == bfspb.FileType_FILE_TYPE_DIR {
		s := fmt.Sprintf("dir id=%d mode=%04o", info.EntryId, info.Mode)
		if info.LockStatus != bfspb.LockStatus_LOCK_STATUS_UNLOCKED {
			s += " " + describeLock(lockOf("", info))
		}
		return s
	}
	s := fmt.Sprintf("file id=%d mode=%04o size=%d", info.EntryId, info.Mode, info.Size)
	for _, b := range info.Blocks {
		s += fmt.Sprintf(" block=%d on %s", b.Id, strings.Join(b.WriteSet, ","))
	}
	if info.WriterSession != "" {
		s += " open by " + info.WriterSession
	}
	return s
}

func (h *harness) ls(d *datadriven.TestData) string {
	entries, _, err := h.s.List(h.arg(d, 0), "", 0)
	if err != nil {
		return "error: " + err.Error()
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name+": "+describeEntry(e))
	}
	return lines(out)
}

func (h *harness) locks() string {
	var out []string
	for _, l := range h.s.Locks().List("/", false, 0) {
		s := l.Path + " " + describeLock(l)
		if IsOperatorSession(l.Session) {
			s += " (operator)"
		} else {
			s += " session=" + string(l.Session)
		}
		out = append(out, s)
	}
	return lines(out)
}

func (h *harness) openFiles() string {
	open, err := h.s.OpenFiles("")
	h.check(err)
	var out []string
	for _, f := range open {
		p, _, err := h.s.PathOf(f.EntryID)
		h.check(err)
		out = append(out, fmt.Sprintf("%s id=%d by %s", p, f.EntryID, f.Session))
	}
	return lines(out)
}

func (h *harness) history(d *datadriven.TestData) string {
	hist, err := h.s.History(h.arg(d, 0))
	if err != nil {
		return "error: " + err.Error()
	}
	var out []string
	for _, e := range hist {
		holder := cmp.Or(e.Holder, "-")
		out = append(out, fmt.Sprintf("epoch=%d holder=%s reason=%s files=%d truncated=%d",
			e.Epoch, holder, e.Reason, e.FilesSealed, e.BytesTruncated))
	}
	return lines(out)
}

// state is what the store says of itself: its cluster id, its applied
// index, its stored counters, and whether it is restoring.
func (h *harness) state() string {
	restoring, err := h.s.Restoring()
	h.check(err)
	if restoring {
		return "restoring (a restore was cut short): applied=0"
	}
	id, err := h.s.getUint64(keyNextID)
	h.check(err)
	epoch, err := h.s.getUint64(keyEpoch)
	h.check(err)
	cluster := cmp.Or(h.s.ClusterID(), "(none)")
	return fmt.Sprintf("cluster=%s applied=%d last-id=%d last-epoch=%d", cluster, h.s.AppliedIndex(), id, epoch)
}

func (h *harness) snapshot(d *datadriven.TestData, name string) snapshot {
	snap, ok := h.snapshots[name]
	if !ok {
		d.Fatalf(h.t, "no snapshot %s", name)
	}
	return snap
}

// replay applies the log to a new store (restored from a snapshot first,
// with from=) and compares it with the live one.
func (h *harness) replay(d *datadriven.TestData) string {
	dir, err := os.MkdirTemp(h.dir, "replay-")
	h.check(err)
	s, err := Open(Options{Dir: dir})
	h.check(err)
	defer s.Close()
	var from uint64
	prefix := fmt.Sprintf("%d commands replayed", len(h.log.entries))
	if name := h.str(d, "from"); name != "" {
		snap := h.snapshot(d, name)
		h.check(s.Restore(snap.dir))
		from = snap.index
		n := 0
		for _, e := range h.log.entries {
			if e.index > from {
				n++
			}
		}
		prefix = fmt.Sprintf("%s restored (index %d), %d commands replayed", name, from, n)
	}
	if err := h.log.replayErr(s, from); err != nil {
		return prefix + ": " + err.Error()
	}
	if diff := diffState(dump(h.t, h.s), dump(h.t, s)); diff != "" {
		return prefix + ": the stores differ: " + diff
	}
	if diff := diffMemory(h.s, s); diff != "" {
		return prefix + ": the stores differ in memory: " + diff
	}
	return fmt.Sprintf("%s: identical (%d keys, applied=%d)", prefix, len(dump(h.t, s)), s.AppliedIndex())
}

func lines(out []string) string {
	if len(out) == 0 {
		return "(none)"
	}
	return strings.Join(out, "\n")
}

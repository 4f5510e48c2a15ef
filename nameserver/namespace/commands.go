package namespace

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// Every kind of command is described once, in commands below: the paths
// it names, the session it acts for, its lock check and its apply step.
// Apply, the session and lock checks and the bookkeeping after a commit
// all read the description; nothing else
// tells the kinds of commands apart. A command without a description is
// refused, and so is one described without a gate: a new kind of command
// is never let through unchecked by omission (TestEveryCommandIsDescribed
// lists the oneof and fails on either).
var commands = newTable(
	describe(kind[*bfspb.MkdirCmd]{
		paths:   one((*bfspb.MkdirCmd).GetPath),
		session: (*bfspb.MkdirCmd).GetSessionId,
		gate:    GateTarget,
		apply:   applyMkdir,
	}),
	describe(kind[*bfspb.CreateCmd]{
		paths:   one((*bfspb.CreateCmd).GetPath),
		session: (*bfspb.CreateCmd).GetSessionId,
		gate:    GateTarget,
		apply:   applyCreate,
	}),
	describe(kind[*bfspb.DeleteFileCmd]{
		paths:   one((*bfspb.DeleteFileCmd).GetPath),
		session: (*bfspb.DeleteFileCmd).GetSessionId,
		gate:    GateTarget,
		apply:   applyDeleteFile,
	}),
	describe(kind[*bfspb.DeleteDirCmd]{
		paths:   one((*bfspb.DeleteDirCmd).GetPath),
		session: (*bfspb.DeleteDirCmd).GetSessionId,
		gate:    GateSubtree,
		apply:   applyDeleteDir,
	}),
	describe(kind[*bfspb.RenameCmd]{
		paths:   func(c *bfspb.RenameCmd) []string { return []string{c.Src, c.Dst} },
		session: (*bfspb.RenameCmd).GetSessionId,
		gate:    GateMove,
		apply:   applyRename,
	}),
	describe(kind[*bfspb.ChmodCmd]{
		paths:   one((*bfspb.ChmodCmd).GetPath),
		session: (*bfspb.ChmodCmd).GetSessionId,
		gate:    GateTarget,
		apply:   applyChmod,
	}),
	describe(kind[*bfspb.OpenSessionCmd]{
		gate:    GateNone,
		ungated: "a session is no part of the file tree",
		apply:   applyOpenSession,
	}),
	describe(kind[*bfspb.CloseSessionCmd]{
		session: (*bfspb.CloseSessionCmd).GetSessionId,
		gate:    GateNone,
		ungated: "a session is no part of the file tree",
		apply:   applyCloseSession,
	}),
	describe(kind[*bfspb.DrainCmd]{
		gate:    GateNone,
		ungated: "a chunkserver is no part of the file tree",
		apply:   applyDrain,
	}),
	describe(kind[*bfspb.FormatCmd]{
		gate:    GateNone,
		ungated: "formatting makes the file tree; nothing in it can be locked yet",
		apply:   applyFormat,
	}),
	describe(kind[*bfspb.MemberCmd]{
		gate:    GateNone,
		ungated: "a nameserver of the group is no part of the file tree",
		apply:   applyMember,
	}),
	describe(kind[*bfspb.ChunkserverCmd]{
		gate:    GateNone,
		ungated: "a chunkserver is no part of the file tree",
		apply:   applyChunkserver,
	}),
	describe(kind[*bfspb.BlockKeyCmd]{
		gate:    GateNone,
		ungated: "a block-token key is no part of the file tree",
		apply:   applyBlockKey,
	}),
	describe(kind[*bfspb.AddBlockCmd]{
		paths:   one((*bfspb.AddBlockCmd).GetPath),
		session: (*bfspb.AddBlockCmd).GetSessionId,
		gate:    GateTarget,
		apply:   applyAddBlock,
	}),
	describe(kind[*bfspb.SyncBlockCmd]{
		paths:   one((*bfspb.SyncBlockCmd).GetPath),
		session: (*bfspb.SyncBlockCmd).GetSessionId,
		gate:    GateTarget,
		apply:   applySyncBlock,
	}),
	describe(kind[*bfspb.CloseFileCmd]{
		paths:   one((*bfspb.CloseFileCmd).GetPath),
		gate:    GateNone,
		ungated: "the nameserver closing a file (lease recovery, a cleaning): locks drain open files, they do not stop their close",
		apply:   applyCloseFile,
	}),
	describe(kind[*bfspb.LockDirCmd]{
		paths:   one((*bfspb.LockDirCmd).GetPath),
		session: (*bfspb.LockDirCmd).GetSessionId,
		gate:    GateNone,
		ungated: "a lock command decides against the lock table itself (dirlock.Table.CanLock)",
		apply:   applyLockDir,
	}),
	describe(kind[*bfspb.UnlockDirCmd]{
		paths: one((*bfspb.UnlockDirCmd).GetPath),
		// A forced unlock acts for nobody: the session it names, if any,
		// need not be live.
		session: func(c *bfspb.UnlockDirCmd) string {
			if c.Force {
				return ""
			}
			return c.SessionId
		},
		gate:    GateNone,
		ungated: "a lock command decides against the lock table itself (dirlock.Table.CanUnlock)",
		apply:   applyUnlockDir,
	}),
	describe(kind[*bfspb.FinishCleaningCmd]{
		paths:   one((*bfspb.FinishCleaningCmd).GetPath),
		gate:    GateNone,
		ungated: "the cleaning coordinator ending its own cleaning, checked against the cleaning's epoch",
		apply:   applyFinishCleaning,
	}),
)

// kind describes the command carrying message C.
type kind[C proto.Message] struct {
	// paths are the paths the command names, in the order its gate takes
	// them; nil for a command outside the file tree. They must be
	// normalized: Apply refuses the command otherwise.
	paths func(C) []string
	// session is the session the command acts for: it must be stored
	// (Apply answers ErrSessionExpired otherwise), and it is whom the
	// gate and the fences check. nil: "" (the nameserver's own commands).
	session func(C) string
	// gate is the command's lock check; a GateNone command says in ungated
	// why it needs none.
	gate    Gate
	ungated string
	// apply is the deterministic step: state + command -> batch contents.
	apply func(*step, C) (*Result, error)
}

// command is a kind with its message type erased, as the table holds it.
type command struct {
	// name is the full name of the message type it describes.
	name    protoreflect.FullName
	gate    Gate
	ungated string
	paths   func(proto.Message) []string
	session func(proto.Message) string
	apply   func(*step, proto.Message) (*Result, error)
}

// describe turns k into the table's form.
func describe[C proto.Message](k kind[C]) *command {
	var zero C
	d := &command{
		name:    zero.ProtoReflect().Descriptor().FullName(),
		gate:    k.gate,
		ungated: k.ungated,
		paths:   optional(k.paths),
		session: optional(k.session),
	}
	if k.apply != nil {
		d.apply = func(st *step, m proto.Message) (*Result, error) { return k.apply(st, m.(C)) }
	}
	return d
}

// optional erases the message type of an optional field of kind: a
// missing one yields the zero value.
func optional[C proto.Message, T any](f func(C) T) func(proto.Message) T {
	if f == nil {
		return func(proto.Message) T {
			var zero T
			return zero
		}
	}
	return func(m proto.Message) T { return f(m.(C)) }
}

// one makes the paths of a command naming one path.
func one[C any](path func(C) string) func(C) []string {
	return func(c C) []string { return []string{path(c)} }
}

// commandTable maps the message type of each op of bfspb.Command to its
// description.
type commandTable map[protoreflect.FullName]*command

// newTable builds the table. Describing a command twice is a mistake in
// the table above, found when the package loads.
func newTable(ds ...*command) commandTable {
	t := make(commandTable, len(ds))
	for _, d := range ds {
		if t[d.name] != nil {
			panic(fmt.Sprintf("namespace: command %s described twice", d.name))
		}
		t[d.name] = d
	}
	return t
}

// opOneof is the oneof of bfspb.Command that holds the operation.
var opOneof = (&bfspb.Command{}).ProtoReflect().Descriptor().Oneofs().ByName("op")

// op is a command bound to its description.
type op struct {
	cmd *bfspb.Command
	msg proto.Message
	d   *command
}

// bind finds the description of cmd.
func bind(cmd *bfspb.Command) (op, error) {
	m := cmd.ProtoReflect()
	fd := m.WhichOneof(opOneof)
	if fd == nil {
		return op{}, fmt.Errorf("%w: empty command", ErrInvalid)
	}
	d := commands[fd.Message().FullName()]
	if d == nil || d.apply == nil {
		return op{}, fmt.Errorf("%w: unknown command %s", ErrInvalid, fd.Name())
	}
	msg := m.Get(fd).Message()
	if !msg.IsValid() {
		return op{}, fmt.Errorf("%w: empty %s command", ErrInvalid, fd.Name())
	}
	return op{cmd: cmd, msg: msg.Interface(), d: d}, nil
}

func (o op) paths() []string { return o.d.paths(o.msg) }
func (o op) session() string { return o.d.session(o.msg) }

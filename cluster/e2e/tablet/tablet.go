package tablet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/internal/nsgroup"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// Mode is what a run does once its files are ready.
type Mode string

// Modes.
const (
	// Serve appends until a lock is lost, then tries stale operations.
	Serve Mode = "serve"
	// Hold keeps the locks and open files until ctx ends.
	Hold Mode = "hold"
	// Rounds appends until a lock is lost, like Serve, then runs one round
	// of stale operations for every command line it reads from
	// Config.Commands (see RunCommands), so the test decides when.
	Rounds Mode = "rounds"
)

// opTimeout bounds every operation, so a run never hangs on one.
const opTimeout = 10 * time.Second

// lostWait bounds how long a Serve run waits, after its stale rounds, for
// the lock handles that have not reported the loss yet.
const lostWait = 10 * time.Second

// Config says what a run does.
type Config struct {
	NameServer string
	// CertsDir holds the client certificate of User to present (the
	// layout of bfs cert); "" speaks plaintext.
	CertsDir, User string
	Holder         string
	// TTL is the session time-to-live asked of the nameserver.
	TTL time.Duration
	// Tablet is the tablet directory ("/tera/t1"); LGs are its locality
	// groups, subdirectories locked after it.
	Tablet string
	LGs    []string
	Mode   Mode
	// Initial is how many bytes every file gets (synced) before
	// KindReady; at least one.
	Initial int
	// MaxAppend bounds the size of one append in Serve mode; appends are
	// between 1 and MaxAppend bytes.
	MaxAppend int
	// StaleRounds is how many rounds of stale operations a Serve run
	// tries after losing its lock.
	StaleRounds int
	// Seed makes the append sizes reproducible.
	Seed uint64
	// Commands is where a Rounds run reads its commands, one per line.
	Commands io.Reader
}

func (c *Config) validate() error {
	switch {
	case c.NameServer == "":
		return errors.New("tablet: no nameserver")
	case c.Tablet == "" || c.Tablet[0] != '/':
		return fmt.Errorf("tablet: tablet directory %q is not absolute", c.Tablet)
	case c.Mode != Serve && c.Mode != Hold && c.Mode != Rounds:
		return fmt.Errorf("tablet: unknown mode %q", c.Mode)
	case c.Mode == Rounds && c.Commands == nil:
		return errors.New("tablet: rounds mode without commands")
	case c.Initial < 1:
		return fmt.Errorf("tablet: initial size %d under one byte", c.Initial)
	case c.Mode != Hold && c.MaxAppend < 1:
		return fmt.Errorf("tablet: append size %d under one byte", c.MaxAppend)
	}
	return nil
}

// file is one file the run writes.
type file struct {
	path    string
	w       *sdk.Writer
	synced  int64
	failed  bool // an append failed; the Writer's error is sticky
	block   int64
	version uint64
	addrs   []string
	// token is the block's write token, as a writer of the file holds it
	// (the raw writes carry it: what refuses them after the unlock is
	// the seal, not a missing token).
	token *bfspb.SignedBlockToken
}

// server is one run.
type server struct {
	cfg Config
	c   *sdk.Client
	// creds are the client certificate of the raw writes (nil: plaintext).
	creds *certs.Creds
	rnd   *rand.Rand
	out   *json.Encoder
	outMu sync.Mutex
	locks []*sdk.Lock
	lost  []bool
	files []*file
}

// Run runs a tablet server as cfg says, writing its events to out. It
// returns when a Serve run has finished, or when ctx ends.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	var creds *certs.Creds
	if cfg.CertsDir != "" {
		var err error
		if creds, err = certs.LoadClient(cfg.CertsDir, cfg.User); err != nil {
			return err
		}
	}
	opts := []sdk.Option{sdk.WithCertsDir(cfg.CertsDir, cfg.User)}
	if cfg.Holder != "" {
		opts = append(opts, sdk.WithHolder(cfg.Holder))
	}
	if cfg.TTL > 0 {
		opts = append(opts, sdk.WithSessionTTL(cfg.TTL))
	}
	c, err := sdk.Dial(ctx, cfg.NameServer, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	s := &server{cfg: cfg, c: c, creds: creds, rnd: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed)), out: json.NewEncoder(out)}
	if err := s.start(ctx); err != nil {
		s.emit(Event{Kind: KindFatal, Err: err.Error()})
		return err
	}
	s.emit(Event{Kind: KindReady})
	if cfg.Mode == Hold {
		<-ctx.Done()
		return nil
	}
	if cfg.Mode == Rounds {
		s.appendUntilLost(ctx)
		err = s.runCommands(ctx)
	} else {
		s.serve(ctx)
	}
	s.emit(Event{Kind: KindFinished})
	return err
}

func (s *server) emit(e Event) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	_ = s.out.Encode(e) // a test that stopped reading has no use for more
}

// start locks the tablet and its locality groups and opens a file in each
// with Initial synced bytes.
func (s *server) start(ctx context.Context) error {
	if err := s.c.MkdirAll(ctx, s.cfg.Tablet, 0); err != nil {
		return err
	}
	if err := s.lock(ctx, s.cfg.Tablet); err != nil {
		return err
	}
	paths := []string{path.Join(s.cfg.Tablet, "log")}
	for _, lg := range s.cfg.LGs {
		dir := path.Join(s.cfg.Tablet, lg)
		if err := s.c.MkdirAll(ctx, dir, 0); err != nil {
			return err
		}
		if err := s.lock(ctx, dir); err != nil {
			return err
		}
		paths = append(paths, path.Join(dir, "sst-0"))
	}
	for _, p := range paths {
		if err := s.open(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

func (s *server) lock(ctx context.Context, dir string) error {
	l, err := s.c.LockDir(ctx, dir)
	if err != nil {
		return err
	}
	s.locks = append(s.locks, l)
	s.lost = append(s.lost, false)
	s.emit(Event{Kind: KindLocked, Path: dir, Epoch: l.Epoch(), Session: l.SessionID()})
	return nil
}

// open creates p, appends Initial bytes and reports where its block is.
func (s *server) open(ctx context.Context, p string) error {
	w, err := s.c.Create(ctx, p)
	if err != nil {
		return err
	}
	f := &file{path: p, w: w}
	s.files = append(s.files, f)
	if !s.append(ctx, f, s.cfg.Initial) {
		return fmt.Errorf("tablet: first append to %s refused", p)
	}
	loc, err := s.c.Locate(ctx, p)
	if err != nil {
		return err
	}
	if len(loc.Blocks) != 1 {
		return fmt.Errorf("tablet: %s has %d blocks after its first sync", p, len(loc.Blocks))
	}
	b := loc.Blocks[0]
	f.block, f.version, f.addrs = b.ID, b.Version, b.Replicas
	if f.token, err = s.writeToken(ctx, p); err != nil {
		return err
	}
	s.emit(Event{Kind: KindOpened, Path: p, Block: b.ID, Replicas: b.Replicas})
	return nil
}

// append writes n bytes to f and syncs them, and reports the attempt.
func (s *server) append(ctx context.Context, f *file, n int) bool {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	start := time.Now()
	_, err := f.w.Write(Pattern(f.path, f.synced, n))
	if err == nil {
		err = f.w.Sync(ctx)
	}
	e := Event{Kind: KindOp, Op: OpAppend, Path: f.path, Offset: f.synced, Len: n, OK: err == nil}
	if err == nil {
		f.synced += int64(n)
		e.Synced = f.synced
	} else {
		f.failed = true
	}
	s.emitOp(e, start, err)
	return err == nil
}

// emitOp reports an operation that started at start and ended now with err.
func (s *server) emitOp(e Event, start time.Time, err error) {
	e.Kind, e.StartNs, e.EndNs = KindOp, start.UnixNano(), time.Now().UnixNano()
	if err != nil {
		e.OK = false
		if e.Refusal == "" {
			e.Refusal = Refusal(err)
		}
		e.Err = err.Error()
	}
	s.emit(e)
}

// serve appends to the files in turn until a lock is lost (or every file
// has failed: a lock handle that never reports the loss must not keep the
// run going forever), then tries the stale rounds.
func (s *server) serve(ctx context.Context) {
	s.appendUntilLost(ctx)
	// A partitioned tablet server may not know yet: try everything again.
	for round := range s.cfg.StaleRounds {
		s.staleRound(ctx, round, true)
		s.checkLost()
	}
	s.waitLost(ctx)
}

// appendUntilLost appends to the files in turn until a lock is lost (or
// every file has failed).
func (s *server) appendUntilLost(ctx context.Context) {
	for ctx.Err() == nil && !s.checkLost() && !s.allFailed() {
		for _, f := range s.files {
			s.append(ctx, f, 1+s.rnd.IntN(s.cfg.MaxAppend))
		}
	}
}

func (s *server) allFailed() bool {
	for _, f := range s.files {
		if !f.failed {
			return false
		}
	}
	return true
}

// checkLost reports the lock handles that closed Done since the last
// look; it returns whether any lock is lost.
func (s *server) checkLost() bool {
	lost := false
	for i, l := range s.locks {
		if !s.lost[i] {
			select {
			case <-l.Done():
				s.lost[i] = true
				s.emit(Event{Kind: KindLockLost, Path: l.Path(), Epoch: l.Epoch(), Err: errString(l.Err())})
			default:
			}
		}
		lost = lost || s.lost[i]
	}
	return lost
}

// waitLost waits a while for the lock handles that still say held.
func (s *server) waitLost(ctx context.Context) {
	t := time.NewTimer(lostWait)
	defer t.Stop()
	for i, l := range s.locks {
		if s.lost[i] {
			continue
		}
		select {
		case <-l.Done():
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
		s.checkLost()
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// writeToken asks for the write token of p's block again, as its writer
// (an AddBlock of the session's open file answers its block, with a
// token), over a connection of its own.
func (s *server) writeToken(ctx context.Context, p string) (*bfspb.SignedBlockToken, error) {
	sess, err := s.c.Session(ctx)
	if err != nil {
		return nil, err
	}
	addrs, err := nsgroup.ParseAddrs(s.cfg.NameServer)
	if err != nil {
		return nil, err
	}
	conn, err := nsgroup.New(nsgroup.Config{Addrs: addrs,
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(certs.TransportCredentials(s.creds))}})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	resp, err := bfspb.NewNameServerClient(conn).AddBlock(ctx, &bfspb.AddBlockRequest{Path: p, SessionId: sess.ID()})
	if err != nil {
		return nil, err
	}
	if resp.Status != bfspb.StatusCode_OK || resp.Block.GetToken() == nil {
		return nil, fmt.Errorf("tablet: write token of %s: %v %s", p, resp.Status, resp.Message)
	}
	return resp.Block.Token, nil
}

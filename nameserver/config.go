package nameserver

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/daemon"
	"github.com/bfs-go/bfs/nameserver/repair"
	"github.com/bfs-go/bfs/nameserver/replica"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Config configures a nameserver.
type Config struct {
	// DataDir holds the namespace (a Pebble directory under it).
	DataDir string
	// ListenAddr is where the bfs nameserver command listens; Serve itself
	// takes a listener.
	ListenAddr string
	// MetricsAddr is the HTTP address for Prometheus metrics (/metrics)
	// and the status page (/, nameserver/statuspage); "" serves none.
	MetricsAddr string
	// Name is this nameserver's name in its group (--id).
	Name string
	// RaftListen is where it listens for its peers (--raft-listen);
	// RaftAdvertise the address they dial (default: RaftListen's).
	RaftListen, RaftAdvertise string
	// Advertise is the client address it publishes in the member table
	// (default: that of the listener Serve is given).
	Advertise string
	// InitialCluster is the group bootstrapped when the data directories
	// are empty (--initial-cluster); empty: a one-voter group of itself.
	InitialCluster []replica.Peer
	// Join starts a member added to an existing group (bfs cluster add):
	// it bootstraps nothing and waits for the leader.
	Join bool
	// Raft tunes the group's timing; zero values are replica's defaults.
	Raft RaftConfig
	// RaftListener, if set, is used instead of listening on RaftListen;
	// RaftDial, if set, dials the peers (a test's proxy, TLS).
	RaftListener net.Listener
	RaftDial     func(ctx context.Context, addr string) (net.Conn, error)
	// StatusPublic serves the status page and its JSON to every client;
	// otherwise only to clients on loopback addresses.
	StatusPublic bool
	// TLS holds the nameserver's node certificate and the cluster's CA
	// (internal/certs): both ports require a client certificate of the CA,
	// and the nameserver dials chunkservers with it. Nil only with
	// Insecure.
	TLS *certs.Creds
	// Insecure serves both ports in plaintext with no authentication; it
	// must be chosen explicitly.
	Insecure bool
	// MinSessionTTL and MaxSessionTTL bound the TTL a client may ask for.
	MinSessionTTL, MaxSessionTTL time.Duration
	// HeartbeatInterval is how often chunkservers are told to heartbeat;
	// DeadTimeout is how long a silent chunkserver counts as alive;
	// ReportInterval is how often they send full block reports.
	HeartbeatInterval, DeadTimeout, ReportInterval time.Duration
	// SealConcurrency bounds the Seal RPCs in flight at once. A fence of
	// many open files is bound by the chunkservers' fdatasyncs, one per
	// replica with unsynced bytes; enough in flight lets the disks overlap
	// them (256 fenced 1,000 files a quarter faster than 64 on one disk).
	SealConcurrency int
	// SafeModeThreshold is the share of the blocks the namespace knows, in
	// (0, 1], that must have a reported replica before the nameserver
	// leaves safe mode by itself (see the package documentation); 0 means
	// DefaultSafeModeThreshold.
	SafeModeThreshold float64
	// SafeModeMinChunkservers is how many chunkservers must have sent a
	// full block report (since the start) before the nameserver leaves
	// safe mode by itself, besides the threshold; 0 waits for none.
	SafeModeMinChunkservers int
	// MinFreeBytes is the free-space floor: a volume of a chunkserver
	// with less free space is never picked for a new block. 0 means no
	// floor.
	MinFreeBytes int64
	// MaxVolumeFill is the most of its capacity a volume is filled to by
	// new blocks, in (0, 1]: a fuller volume is never picked (1 fills to
	// the floor). 0 means DefaultMaxVolumeFill.
	MaxVolumeFill float64
	// MinReplication is the fewest replicas a new block may start with
	// when fewer live chunkservers (above the floor) exist than the file's
	// replication: the write proceeds degraded and the block is queued for
	// repair. 0 means 1.
	MinReplication int
	// RepairInterval is how often every block's replicas are checked
	// (nameserver/repair); checks also follow every event that changes a
	// block's replicas. 0 means repair.DefaultInterval.
	RepairInterval time.Duration
	// RepairMaxCopies bounds the repair copies in flight in the cluster,
	// RepairMaxCopiesPerServer those of one chunkserver, as source and as
	// target together. 0 means the defaults (32, 4).
	RepairMaxCopies, RepairMaxCopiesPerServer int
	// BlockTokenLifetime is how long a block token the nameserver issues
	// (AddBlock, GetFileLocation, ReplicateBlock) is good for; 0 means
	// DefaultBlockTokenLifetime. BlockKeyRotation is how often the leader
	// makes a new key to sign them with; 0 means DefaultBlockKeyRotation.
	// It is at least twice the lifetime: the key before the newest is
	// still accepted, until every token it signed has expired.
	BlockTokenLifetime, BlockKeyRotation time.Duration
	// UnallocatedGrace is how long a replica of a block id the namespace
	// never allocated is kept, from the first block report that names it,
	// before a report is answered with its deletion; 0 means
	// DefaultUnallocatedGrace, a negative value keeps them for ever (the
	// behaviour before, for a namespace restored from an old copy while
	// the chunkservers hold newer blocks).
	UnallocatedGrace time.Duration
	// Limits bound what one client can make the nameserver hold (SPEC
	// §10; BUILD.md "Limits"). Each refusal is RESOURCE_EXHAUSTED,
	// counted in bfs_nameserver_limit_refusals_total{limit}. 0 means the
	// default.
	Limits Limits
	// Clock is the source of time; the real clock if nil.
	Clock clock.Clock
	// TestingKnobs are seams for tests; the zero value is production.
	TestingKnobs TestingKnobs
}

// Defaults of the block tokens and of unallocated replicas (see Config).
const (
	DefaultBlockTokenLifetime = 10 * time.Minute
	DefaultBlockKeyRotation   = 10 * time.Hour
	DefaultUnallocatedGrace   = time.Hour
)

// MaxVolumeBytes is the most capacity (and free space) the nameserver
// believes of one volume of a chunkserver: 1 PiB, beyond any disk, so
// that a figure nobody can hold places no replica and sums of a cluster's
// volumes stay far from overflowing.
const MaxVolumeBytes int64 = 1 << 50

// Limits are the nameserver's bounds per client; see DefaultLimits for
// why each default is what it is.
type Limits struct {
	// MaxMessageSize bounds every gRPC message received or sent, in bytes
	// (--max-message-size).
	MaxMessageSize int
	// MaxWatchesPerIdentity bounds an identity's WatchDirLocks streams
	// of a prefix (--max-watches-per-identity); MaxWatchesPerSession
	// those filtered to one session, whoever opens them
	// (--max-watches-per-session).
	MaxWatchesPerIdentity, MaxWatchesPerSession int
	// MaxWatches bounds the WatchDirLocks streams of a prefix of all
	// identities together (--max-watches).
	MaxWatches int
	// WatchBuffer is how many transitions a watch keeps for a watcher
	// that reads slowly; one further behind is cut off (--watch-buffer).
	WatchBuffer int
	// MaxSessionsPerIdentity bounds the live sessions of an identity
	// (--max-sessions-per-identity), MaxSessions those of all
	// (--max-sessions).
	MaxSessionsPerIdentity, MaxSessions int
	// MaxLockWaitsPerIdentity bounds an identity's LockDir and UnlockDir
	// calls waiting at once (with wait) (--max-lock-waits-per-identity).
	MaxLockWaitsPerIdentity int
}

// DefaultLimits are the bounds of a nameserver whose configuration
// leaves them zero.
//
//   - Messages: 4 MiB, gRPC's default for what a server receives and a
//     client accepts; listings and reports are paged well under it.
//   - Watches of a prefix: 64 per identity. Each is one goroutine and
//     one stream, and sees every transition under its prefix; a master
//     or an operator's lockctl watch needs one or a few.
//   - Watches of a prefix in all: 256. Each transition is sent to every
//     one watching above its path, and a stream that is sent transitions
//     faster than its client reads holds what gRPC buffered for it (some
//     hundreds of KB). With 256 streams of "/" that never read, another
//     client's lock+unlock stayed at p99 28 ms (13 ms once they filled)
//     and the heap under 100 MB; 1,024 took it to 266 ms and 333 MB,
//     10,000 to about a second and 3 GB. A cluster's masters and
//     operators need a few dozen.
//   - Watches of one session: 4. The SDK keeps one per session (a
//     client's lock handles); the rest leaves room for one it replaced
//     while the nameserver has not yet seen the old one end (a broken
//     connection). Sessions are bounded per identity, so these are too.
//   - Watch buffer: 4096 transitions, what the lock ends of a big fence
//     (a tablet server with a thousand tablets) make at once.
//   - Sessions: 1,000 per identity, 100,000 in all. A client process
//     holds one session, so an identity shared by a thousand processes
//     (a Tera cluster's tablet servers under one certificate) fits; a
//     client that leaks sessions is stopped long before it costs the
//     nameserver anything (a session is some 200 bytes in memory and a
//     record in the namespace, and keeps no goroutine). The total keeps
//     the session table at the size SPEC §5 asks to cost little (tens of
//     thousands) whatever the number of certificates.
//   - Lock waits: 1,000 per identity, one per session of a full
//     identity. Every lock transition wakes each waiting call to look
//     at the lock table again.
func DefaultLimits() Limits {
	return Limits{
		MaxMessageSize:          daemon.DefaultMaxMessageSize,
		MaxWatchesPerIdentity:   64,
		MaxWatchesPerSession:    4,
		MaxWatches:              256,
		WatchBuffer:             4096,
		MaxSessionsPerIdentity:  1000,
		MaxSessions:             100_000,
		MaxLockWaitsPerIdentity: 1000,
	}
}

// fill sets the limits left zero to their defaults, and refuses a
// negative one.
func (l *Limits) fill() error {
	def := DefaultLimits()
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"max message size", &l.MaxMessageSize, def.MaxMessageSize},
		{"max watches per identity", &l.MaxWatchesPerIdentity, def.MaxWatchesPerIdentity},
		{"max watches per session", &l.MaxWatchesPerSession, def.MaxWatchesPerSession},
		{"max watches", &l.MaxWatches, def.MaxWatches},
		{"watch buffer", &l.WatchBuffer, def.WatchBuffer},
		{"max sessions per identity", &l.MaxSessionsPerIdentity, def.MaxSessionsPerIdentity},
		{"max sessions", &l.MaxSessions, def.MaxSessions},
		{"max lock waits per identity", &l.MaxLockWaitsPerIdentity, def.MaxLockWaitsPerIdentity},
	} {
		if *f.v < 0 {
			return fmt.Errorf("nameserver: negative %s %d", f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	return nil
}

// RaftConfig tunes the group's timing and snapshots.
type RaftConfig struct {
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout time.Duration
	SnapshotInterval                                      time.Duration
	SnapshotThreshold, TrailingLogs                       uint64
}

// TestingKnobs let tests hold a nameserver at chosen points.
type TestingKnobs struct {
	// TokenLifetime, if set, is asked the lifetime of every block token
	// issued; a non-zero answer replaces Config.BlockTokenLifetime and may
	// be negative (the token is issued expired).
	TokenLifetime func(access bfspb.BlockAccess) time.Duration
	// BeforeClose, if set, is called when a file being closed has been
	// found ready (every awaited replica reported or declared dead), before
	// its close is decided and persisted.
	BeforeClose func(entry uint64)
	// BeforeTruncate, if set, is called before every Truncate the
	// nameserver sends to a chunkserver (addr) for block, to size. It may
	// block; ctx ends when the nameserver closes.
	BeforeTruncate func(ctx context.Context, addr string, block, size int64)
	// BeforeSeal, if set, is called before every Seal the nameserver
	// sends to a chunkserver (addr) for block. It may block; ctx ends
	// with the term.
	BeforeSeal func(ctx context.Context, addr string, block int64)
	// BeforeFinishCleaning, if set, is called when the cleaning of the
	// directory path has drained every file (each closed, its replicas
	// at the agreed length), before UNLOCKED is proposed. It may block;
	// ctx ends with the term.
	BeforeFinishCleaning func(ctx context.Context, path string)
	// DialChunkserver, if set, replaces the gRPC client of the chunkserver
	// at addr for every call the nameserver makes to one (CreateBlock,
	// Seal, Truncate, GetBlockInfo, DeleteBlocks, ReplicateBlock): a
	// fleet of fakes.
	DialChunkserver func(addr string) (bfspb.ChunkServerClient, error)
	// DeletePage, if positive, replaces DefaultDeletePage.
	DeletePage int
	// RaftLocal runs a group of one with a Raft transport in memory (no
	// listener): for tests whose goroutines must all block on channels
	// (a testing/synctest bubble).
	RaftLocal bool
	// StatusSampleInterval, if positive, is how often the status page
	// samples the metrics its charts draw (statuspage.DefaultSampleInterval
	// otherwise).
	StatusSampleInterval time.Duration
}

// DefaultMaxVolumeFill keeps a twentieth of every volume free: room for
// the writes already placed there, and for the file system to keep its
// performance.
const DefaultMaxVolumeFill = 0.95

// DefaultConfig returns the configuration of a nameserver on this host.
func DefaultConfig() Config {
	return Config{
		DataDir:     "bfs-data/nameserver",
		ListenAddr:  "127.0.0.1:8828",
		MetricsAddr: "127.0.0.1:8829",
		Name:        "ns1",
		// A group of one has no peer to tell its address: any free port
		// serves, and it may change from one start to the next. A member
		// of a larger group needs a fixed one (--raft-listen).
		RaftListen:        "127.0.0.1:0",
		MinSessionTTL:     time.Second,
		MaxSessionTTL:     10 * time.Minute,
		HeartbeatInterval: time.Second,
		DeadTimeout:       10 * time.Second,
		ReportInterval:    time.Minute,
		SealConcurrency:   256,
		SafeModeThreshold: DefaultSafeModeThreshold,
		MinFreeBytes:      1 << 30,
		MaxVolumeFill:     DefaultMaxVolumeFill,
		MinReplication:    1,
		RepairInterval:    repair.DefaultInterval,
		// Four copies at once per chunkserver keep an idle disk busy
		// between one copy's sync and the next's first bytes (copies
		// yield to clients on the chunkservers: --copy-rate); 32 in all
		// keep a big cluster's repair going.
		RepairMaxCopies:          repair.DefaultMaxCopies,
		RepairMaxCopiesPerServer: repair.DefaultMaxCopiesPerServer,
		Limits:                   DefaultLimits(),
	}
}

func (c *Config) validate() error {
	if c.DataDir == "" {
		return fmt.Errorf("nameserver: empty data directory")
	}
	if c.Name == "" {
		return fmt.Errorf("nameserver: empty name (--id)")
	}
	if c.RaftListen == "" && c.RaftListener == nil && !c.TestingKnobs.RaftLocal {
		return fmt.Errorf("nameserver: no raft address (--raft-listen)")
	}
	if err := daemon.CheckSecurity(c.TLS, c.Insecure); err != nil {
		return fmt.Errorf("nameserver: %w", err)
	}
	if c.TLS != nil && !c.TLS.Identity().IsNameServer() {
		// Chunkservers would refuse every command it sends.
		return fmt.Errorf("nameserver: the certificate in %s names %s, not a nameserver: make one with bfs cert create-node --role nameserver",
			c.TLS.Dir(), c.TLS.Identity())
	}
	if c.BlockTokenLifetime == 0 {
		c.BlockTokenLifetime = DefaultBlockTokenLifetime
	}
	if c.BlockKeyRotation == 0 {
		c.BlockKeyRotation = DefaultBlockKeyRotation
	}
	if c.BlockTokenLifetime < 0 || c.BlockKeyRotation < 2*c.BlockTokenLifetime {
		return fmt.Errorf("nameserver: block keys rotate every %v, block tokens live %v: the rotation must be at least twice the lifetime",
			c.BlockKeyRotation, c.BlockTokenLifetime)
	}
	if c.UnallocatedGrace == 0 {
		c.UnallocatedGrace = DefaultUnallocatedGrace
	}
	if c.MinSessionTTL == 0 {
		c.MinSessionTTL = time.Second
	}
	if c.MaxSessionTTL == 0 {
		c.MaxSessionTTL = 10 * time.Minute
	}
	if c.MinSessionTTL < 0 || c.MaxSessionTTL < c.MinSessionTTL {
		return fmt.Errorf("nameserver: session TTL bounds [%v, %v] are invalid", c.MinSessionTTL, c.MaxSessionTTL)
	}
	def := DefaultConfig()
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&c.HeartbeatInterval, def.HeartbeatInterval}, {&c.DeadTimeout, def.DeadTimeout}, {&c.ReportInterval, def.ReportInterval}} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < 0 {
			return fmt.Errorf("nameserver: negative interval %v", *d.v)
		}
	}
	if c.DeadTimeout <= c.HeartbeatInterval {
		return fmt.Errorf("nameserver: dead timeout %v must exceed the heartbeat interval %v", c.DeadTimeout, c.HeartbeatInterval)
	}
	if c.SealConcurrency == 0 {
		c.SealConcurrency = def.SealConcurrency
	}
	if c.SealConcurrency < 0 {
		return fmt.Errorf("nameserver: negative seal concurrency")
	}
	if c.SafeModeThreshold == 0 {
		c.SafeModeThreshold = DefaultSafeModeThreshold
	}
	if !(c.SafeModeThreshold > 0 && c.SafeModeThreshold <= 1) {
		return fmt.Errorf("nameserver: safe mode threshold %v is not in (0, 1]", c.SafeModeThreshold)
	}
	if c.MinFreeBytes < 0 || c.MinReplication < 0 || c.SafeModeMinChunkservers < 0 {
		return fmt.Errorf("nameserver: negative free-space floor (%d), minimum replication (%d) or safe mode chunkservers (%d)",
			c.MinFreeBytes, c.MinReplication, c.SafeModeMinChunkservers)
	}
	if c.MaxVolumeFill == 0 {
		c.MaxVolumeFill = DefaultMaxVolumeFill
	}
	if !(c.MaxVolumeFill > 0 && c.MaxVolumeFill <= 1) {
		return fmt.Errorf("nameserver: volume fill ratio %v is not in (0, 1]", c.MaxVolumeFill)
	}
	if c.MinReplication == 0 {
		c.MinReplication = 1
	}
	if c.RepairInterval < 0 || c.RepairMaxCopies < 0 || c.RepairMaxCopiesPerServer < 0 {
		return fmt.Errorf("nameserver: negative repair interval (%v) or copy bounds (%d, %d per chunkserver)",
			c.RepairInterval, c.RepairMaxCopies, c.RepairMaxCopiesPerServer)
	}
	if err := c.Limits.fill(); err != nil {
		return err
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	return nil
}

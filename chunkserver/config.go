package chunkserver

import (
	"fmt"
	"time"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/chunkserver/volume"

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/daemon"
)

// Config configures a chunkserver.
type Config struct {
	// DataDir holds the block replicas of a chunkserver with one volume
	// (see chunkserver/blockstore). DataDirs lists the volumes of one with
	// several, a data directory per disk (bfs chunkserver --data
	// DIR1,DIR2,...; see chunkserver/volume); when set, DataDir is not
	// used.
	DataDir  string
	DataDirs []string
	// FailedVolumesTolerated is how many failed volumes the chunkserver
	// keeps serving with; past it, Serve stops with an error. -1 (the
	// default) serves while one volume is left: a failed disk costs the
	// cluster that disk's replicas, not the whole machine's.
	FailedVolumesTolerated int
	// VolumeCheckTimeout is how long a check of a volume's disk may take
	// before the volume is taken for hung (a disk that stalls rather than
	// failing) and goes out of service; 0 means volume.DefaultCheckTimeout.
	VolumeCheckTimeout time.Duration
	// ListenAddr is where the bfs chunkserver command listens; Serve itself
	// takes a listener.
	ListenAddr string
	// AdvertiseAddr is the address given to the nameserver, which hands it
	// to clients; "" means the listener's address.
	AdvertiseAddr string
	// NameServerAddr is the nameserver to register with; "" runs the
	// chunkserver alone (no registration, heartbeats or reports).
	NameServerAddr string
	// MetricsAddr is the HTTP address for Prometheus metrics; "" serves none.
	MetricsAddr string
	// TLS holds the chunkserver's node certificate and the cluster's CA
	// (internal/certs): both ports require a client certificate of the CA,
	// and the chunkserver dials the nameserver and other chunkservers
	// (copies) with it. Nil only with Insecure.
	TLS *certs.Creds
	// Insecure serves both ports in plaintext with no authentication; it
	// must be chosen explicitly.
	Insecure bool
	// HeartbeatInterval and ReportInterval set how often the chunkserver
	// heartbeats and sends a full block report. Intervals the nameserver
	// returns at registration take precedence.
	HeartbeatInterval time.Duration
	ReportInterval    time.Duration
	// ScrubRate is the rate, in bytes per second, at which the scrubber
	// verifies the sealed replicas' checksums; 0 runs no scrubber.
	ScrubRate int64
	// MaxCopies is the most block copies (ReplicateBlock) the chunkserver
	// makes at once; more are refused with RESOURCE_EXHAUSTED.
	MaxCopies int
	// CopyRate caps, in bytes per second, the bytes all copies together
	// take in here, and send from here as their source, while the
	// chunkserver's clients are busy (a write or read stream open, or one
	// ended within a second); while they are idle copies run at the
	// disk's speed. 0 is no cap.
	CopyRate int64
	// MaxMessageSize bounds every gRPC message the chunkserver receives
	// or sends, in bytes (--max-message-size); a bigger one is refused
	// RESOURCE_EXHAUSTED. 0 means daemon.DefaultMaxMessageSize.
	MaxMessageSize int
	// WriteIdleTimeout ends a Write stream that sends no packet for this
	// long (--write-idle-timeout), RESOURCE_EXHAUSTED with the limit
	// write_idle in its trailer; the SDK opens a new stream when its
	// writer goes on. 0 means DefaultWriteIdleTimeout.
	WriteIdleTimeout time.Duration
	// HostID names the machine for the nameserver's placement, which puts
	// the replicas of a block on distinct hosts; "" means the host part of
	// the advertised address. Set it to run several chunkservers on one
	// machine as if on several.
	HostID string
	// Clock is the source of time; the real clock if nil.
	Clock clock.Clock
	// TestingKnobs are seams for tests; the zero value is production.
	TestingKnobs TestingKnobs
}

// TestingKnobs let tests watch a chunkserver from the inside.
type TestingKnobs struct {
	// WritePacket, if set, is called with the wire format of every write
	// packet received, before it is decoded. It must not keep wire.
	WritePacket func(wire []byte)
	// Seal, if set, is called before every Seal; an error fails the Seal
	// as a failing disk would.
	Seal func(block int64) error
	// CreateBlock, if set, is called before every CreateBlock; it may
	// block, and an error fails the call as a failing disk would.
	CreateBlock func(block int64) error
	// DiskSpace, if set, replaces the capacity and free bytes of a
	// volume's data directory.
	DiskSpace func(dir string) (capacity, free int64)
	// VolumeFault, if set, is called before the disk I/O of the volume in
	// dir (volume.TestingKnobs.Fault): an error fails the I/O as the disk
	// would, and it may block, as a hung disk does.
	VolumeFault func(dir string, op blockstore.Op, path string) error
	// VolumeCheckInterval, if positive, replaces
	// volume.DefaultCheckInterval.
	VolumeCheckInterval time.Duration
	// ReportPage, if positive, replaces DefaultReportPage.
	ReportPage int
}

// DefaultReportPage is how many replicas one message of a full block
// report carries: at most some 40 bytes each on the wire, so 2.6 MiB, in
// the default 4 MiB gRPC message limit.
const DefaultReportPage = 1 << 16

// DefaultScrubRate verifies a terabyte of replicas in about a day.
const DefaultScrubRate = 16 << 20

// DefaultMaxCopies and DefaultCopyRate bound the copies a chunkserver
// makes for re-replication. The rate holds only while clients are busy,
// so that repair leaves them the disk; an idle chunkserver copies at the
// disk's speed.
const (
	DefaultMaxCopies = 4
	DefaultCopyRate  = 32 << 20
)

// DefaultWriteIdleTimeout is how long a Write stream may wait for its
// next packet. The SDK sends a packet whenever its 256 KiB buffer fills,
// on Sync and on Close, and opens a new stream after a longer pause, so
// only a writer that went away, or one that never writes, waits this
// long. Such a stream holds two goroutines and counts as a busy client,
// which holds repair copies to --copy-rate. A minute is HDFS's datanode
// read timeout, and long enough that a paused writer does not reopen
// its streams over and over.
const DefaultWriteIdleTimeout = time.Minute

// DefaultConfig returns the configuration of a chunkserver on this host
// next to a nameserver with its default configuration.
func DefaultConfig() Config {
	return Config{
		DataDir:                "bfs-data/chunkserver",
		FailedVolumesTolerated: -1,
		VolumeCheckTimeout:     volume.DefaultCheckTimeout,
		ListenAddr:             "127.0.0.1:8830",
		NameServerAddr:         "127.0.0.1:8828",
		MetricsAddr:            "127.0.0.1:8831",
		HeartbeatInterval:      time.Second,
		ReportInterval:         time.Minute,
		ScrubRate:              DefaultScrubRate,
		MaxCopies:              DefaultMaxCopies,
		CopyRate:               DefaultCopyRate,
		MaxMessageSize:         daemon.DefaultMaxMessageSize,
		WriteIdleTimeout:       DefaultWriteIdleTimeout,
	}
}

func (c *Config) validate() error {
	if c.DataDir == "" && len(c.DataDirs) == 0 {
		return fmt.Errorf("chunkserver: no data directory")
	}
	if err := daemon.CheckSecurity(c.TLS, c.Insecure); err != nil {
		return fmt.Errorf("chunkserver: %w", err)
	}
	if c.VolumeCheckTimeout < 0 {
		return fmt.Errorf("chunkserver: negative volume check timeout %v", c.VolumeCheckTimeout)
	}
	if c.TLS != nil && !c.TLS.Identity().IsChunkserver() {
		// The nameserver would refuse its registration.
		return fmt.Errorf("chunkserver: the certificate in %s names %s, not a chunkserver: make one with bfs cert create-node --role chunkserver",
			c.TLS.Dir(), c.TLS.Identity())
	}
	if c.ScrubRate < 0 {
		return fmt.Errorf("chunkserver: negative scrub rate %d", c.ScrubRate)
	}
	if c.MaxCopies < 0 || c.CopyRate < 0 {
		return fmt.Errorf("chunkserver: negative copy bound (max copies %d, copy rate %d)", c.MaxCopies, c.CopyRate)
	}
	if c.MaxCopies == 0 {
		c.MaxCopies = DefaultMaxCopies
	}
	if c.MaxMessageSize < 0 || c.WriteIdleTimeout < 0 {
		return fmt.Errorf("chunkserver: negative limit (max message size %d, write idle timeout %v)", c.MaxMessageSize, c.WriteIdleTimeout)
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = daemon.DefaultMaxMessageSize
	}
	if c.WriteIdleTimeout == 0 {
		c.WriteIdleTimeout = DefaultWriteIdleTimeout
	}
	if c.HeartbeatInterval < 0 || c.ReportInterval < 0 {
		return fmt.Errorf("chunkserver: negative interval (heartbeat %v, report %v)", c.HeartbeatInterval, c.ReportInterval)
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = time.Second
	}
	if c.ReportInterval == 0 {
		c.ReportInterval = time.Minute
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	return nil
}

// volumes are the data directories, one per volume.
func (c *Config) volumes() []string {
	if len(c.DataDirs) > 0 {
		return c.DataDirs
	}
	return []string{c.DataDir}
}

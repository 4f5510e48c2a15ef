package sdk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/golang/glog"
	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/internal/connpool"
	"github.com/bfs-go/bfs/internal/nsgroup"
	"github.com/bfs-go/bfs/internal/taskgroup"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Client is a connection to a nameserver, with at most one live session.
// It is safe for concurrent use; Close releases it.
type Client struct {
	conn *nsgroup.Conn
	// dialOptions are those of the connections to the nameservers.
	dialOptions []grpc.DialOption
	ns          bfspb.NameServerClient
	holder      string
	ttl         time.Duration
	clock       clock.Clock
	// peers are the connections to chunkservers.
	peers *connpool.Pool
	// fences are the locks the client holds or lost (see fences).
	fences fences

	// opening is a one-slot semaphore serializing session opens, so that
	// callers finding no session open one between them, not one each. A
	// channel rather than a mutex so that waiting honors the caller's ctx.
	opening chan struct{}
	// keepalives counts running keep-alive goroutines, lockWatches the
	// goroutines watching held locks; Close waits for both.
	keepalives  sync.WaitGroup
	lockWatches sync.WaitGroup
	// background runs the best-effort calls made off a caller's path
	// (reports of corrupt replicas); Close stops them.
	background *taskgroup.Group

	mu struct {
		sync.Mutex
		closed bool
		// session is the latest session opened; it may be lost already.
		session *Session
		// writes are the block writes in progress; Close aborts them.
		writes map[*fanout]struct{}
	}
}

// nameServerDialOptions come before the caller's dial options on the
// connection to the nameserver. A fixed flow-control window: gRPC's
// default, a window sized by bandwidth-delay estimation, sends a PING with
// every response that finds no estimate in flight, one more frame, write
// and wakeup each way per call for small calls, forever. 16 MiB is the cap
// the estimate would grow to, so large listings stream as fast as before.
var nameServerDialOptions = []grpc.DialOption{
	grpc.WithStaticStreamWindowSize(16 << 20),
	grpc.WithStaticConnWindowSize(16 << 20),
}

// idempotent lists the calls sent again when their outcome is unknown:
// reads, and the writes that a second time change nothing (a lock the
// session holds is granted again with its epoch; AddBlock is answered
// from the file; a sync or a finish repeats what it says).
var idempotent = func() map[string]bool {
	m := map[string]bool{}
	for _, name := range []string{"Stat", "List", "DiskUsage", "GetFileLocation", "GetDirLock", "ListDirLocks",
		"ListSessions", "GetLockHistory", "KeepAlive", "LockDir", "AddBlock", "SyncBlock", "FinishFile",
		"GetSafeMode", "ListChunkservers", "Fsck", "ClusterStatus"} {
		m["/bfs.NameServer/"+name] = true
	}
	return m
}()

// Dial returns a Client for the nameserver group at addr: one address
// ("127.0.0.1:8828") or a comma-separated list of the group's members.
// Calls go to the leader and follow it as it moves: a member that does
// not lead answers NOT_LEADER (nothing applied), which is always sent
// again to the leader; a call whose outcome is unknown (UNAVAILABLE) is
// sent again only if it is idempotent (reads, KeepAlive, LockDir of the
// same session, AddBlock, SyncBlock, FinishFile), and otherwise returns an
// error matching ErrUnavailable. The connections are made lazily: an
// unreachable group shows in the first call. ctx bounds only the work
// Dial itself does (finding the local address for the holder id), not the
// Client's life.
//
// Unless WithHolder is given, the holder id is "ip:port:timestamp" of this
// process: the local IP address the host uses to reach addr (the host name
// when it cannot tell), the process id in place of a port (an SDK client
// listens on none), and the process start time in Unix seconds.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	addrs, err := nsgroup.ParseAddrs(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %q: %w: %v", addr, ErrInvalidArgument, err)
	}
	if o.holder == "" {
		o.holder = defaultHolder(ctx, addrs[0])
	}
	creds, err := o.transportCredentials()
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	base := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	dialOptions := slices.Concat(base, nameServerDialOptions, o.dialOptions)
	conn, err := nsgroup.New(nsgroup.Config{
		Addrs:       addrs,
		DialOptions: dialOptions,
		Idempotent:  idempotent,
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	c := &Client{
		conn:        conn,
		dialOptions: dialOptions,
		ns:          bfspb.NewNameServerClient(conn),
		holder:      o.holder,
		ttl:         o.ttl,
		clock:       o.clock,
		opening:     make(chan struct{}, 1),
		background:  taskgroup.New(),
	}
	c.peers = connpool.New(slices.Concat(base, o.dialOptions, dataDialOptions)...)
	return c, nil
}

// Holder returns the holder id this client records with its sessions.
func (c *Client) Holder() string { return c.holder }

// Close closes the session, if one is open (best effort, bounded by a short
// timeout: the nameserver expires it anyway), stops the keep-alive and
// closes the connection. Later calls on c return ErrClosed; Close itself
// may be called again and then does nothing.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.closed = true
	s := c.mu.session
	writes := c.mu.writes
	c.mu.writes = nil
	c.mu.Unlock()

	for f := range writes {
		f.abort()
	}
	if s != nil {
		s.stop()
	}
	c.keepalives.Wait()
	c.lockWatches.Wait()
	c.background.Stop()
	if s != nil && s.Err() == nil {
		c.closeSession(s)
		s.end(ErrClosed)
	}
	c.peers.Close()
	return c.conn.Close()
}

// checkOpen returns ErrClosed after Close.
func (c *Client) checkOpen() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return ErrClosed
	}
	return nil
}

// closeSession tells the nameserver that s is over, so it releases what s
// held now rather than at expiry. Failures are only logged.
func (c *Client) closeSession(s *Session) {
	ctx, cancel := context.WithTimeout(context.Background(), closeSessionTimeout)
	defer cancel()
	resp, err := c.ns.CloseSession(ctx, &bfspb.CloseSessionRequest{SessionId: s.id})
	if err == nil {
		err = responseError(resp)
	}
	if err != nil && glog.V(1) {
		glog.Infof("bfs sdk: close session %s: %v", s.id, err)
	}
}

// mutate runs call, a namespace mutation, with the id of the client's
// session, opening one if needed. When the nameserver answers that the
// session expired, that session is marked lost and call runs once more
// with a new one: the refusal means nothing was changed.
func (c *Client) mutate(ctx context.Context, call func(sessionID string) (response, error)) error {
	for attempt := 0; ; attempt++ {
		s, err := c.Session(ctx)
		if err != nil {
			return err
		}
		resp, err := call(s.id)
		if err != nil {
			return transportError(ctx, err)
		}
		if resp.GetStatus() == bfspb.StatusCode_SESSION_EXPIRED {
			s.end(ErrSessionExpired)
			if attempt == 0 {
				continue
			}
		}
		return responseError(resp)
	}
}

// mutateAs runs call, a mutation that must happen under session id (the
// one a file was opened for write with): unlike mutate it never moves to
// a new session. SESSION_EXPIRED marks the session lost.
func (c *Client) mutateAs(ctx context.Context, id string, call func() (response, error)) error {
	if err := c.checkOpen(); err != nil {
		return err
	}
	resp, err := call()
	if err != nil {
		return transportError(ctx, err)
	}
	if resp.GetStatus() == bfspb.StatusCode_SESSION_EXPIRED {
		c.mu.Lock()
		s := c.mu.session
		c.mu.Unlock()
		if s != nil && s.id == id {
			s.end(ErrSessionExpired)
		}
	}
	return responseError(resp)
}

// track registers a block write so that Close can abort it.
func (c *Client) track(f *fanout) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return ErrClosed
	}
	if c.mu.writes == nil {
		c.mu.writes = make(map[*fanout]struct{})
	}
	c.mu.writes[f] = struct{}{}
	return nil
}

func (c *Client) untrack(f *fanout) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.mu.writes, f)
}

// chunkserver returns a client of the chunkserver at addr.
func (c *Client) chunkserver(addr string) (bfspb.ChunkServerClient, error) {
	conn, err := c.peers.Conn(addr)
	if errors.Is(err, connpool.ErrClosed) {
		return nil, ErrClosed
	}
	if err != nil {
		return nil, err
	}
	return bfspb.NewChunkServerClient(conn), nil
}

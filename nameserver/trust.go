package nameserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/golang/glog"
	"google.golang.org/grpc/peer"

	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// What the nameserver takes from whom (SPEC §10; see the package
// documentation, "Trust"): chunkserver calls only from a chunkserver's
// certificate, and a registered chunkserver's reports only from the
// certificate that registered it.

// errNotChunkserver refuses a chunkserver call from another certificate
// than the one it needs.
var errNotChunkserver = errors.New("permission denied")

// errBadAddress refuses a registration whose address cannot be a
// chunkserver's.
var errBadAddress = errors.New("bad chunkserver address")

// registrations remembers, for the term, which certificate registered
// each chunkserver address ("" on an insecure nameserver). Ids need no
// record of their own: the block map takes a call only for the id
// registered at the address it names (and ids start again at 1 in every
// term, so an id alone may be another's from the term before).
type registrations struct {
	mu     sync.Mutex
	byAddr map[string]string
}

func (r *registrations) record(addr, who string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byAddr == nil {
		r.byAddr = make(map[string]string)
	}
	r.byAddr[addr] = who
}

// of returns who registered addr, and whether anyone did.
func (r *registrations) of(addr string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.byAddr[addr]
	return w, ok
}

// check refuses who speaking for the chunkserver at addr when another
// certificate registered it. An address nobody registered this term
// passes: the call then finds no chunkserver (and a heartbeat is told to
// register again).
func (r *registrations) check(addr, who string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.byAddr[addr]; ok && w != who {
		return fmt.Errorf("%w: chunkserver %s was registered by %s, not %s", errNotChunkserver, addr, w, who)
	}
	return nil
}

// chunkserverPeer returns who the peer of ctx is, refusing one that may
// not speak for a chunkserver: on a secure nameserver only a node
// certificate of the chunkserver role (or one made before roles) may.
func (s *Server) chunkserverPeer(ctx context.Context, op string) (string, error) {
	if s.cfg.TLS == nil {
		return "", nil
	}
	id, ok := certs.PeerIdentity(ctx)
	if !ok || !id.IsChunkserver() {
		err := fmt.Errorf("%w: %s from %s: only a chunkserver's certificate may", errNotChunkserver, op, who(ctx))
		glog.Warningf("%v", err)
		return "", err
	}
	return id.String(), nil
}

// fromChunkserver refuses op for the chunkserver at addr unless the peer
// is the certificate that registered it.
func (t *term) fromChunkserver(ctx context.Context, op string, addr string) error {
	w, err := t.chunkserverPeer(ctx, op)
	if err == nil {
		err = t.regs.check(addr, w)
	}
	if err != nil && t.cfg.TLS != nil {
		glog.Warningf("%s refused: %v", op, err)
	}
	return err
}

// checkAddress refuses, on a secure nameserver, an address a chunkserver
// cannot be reached at (no port, port 0, an unspecified host) and one
// whose host the peer's certificate does not name: a chunkserver
// registers only where its certificate says it serves, so nobody can
// register at another's address. An insecure nameserver takes any
// address but the empty one, as before (in-process tests name their fake
// chunkservers as they like).
func (t *term) checkAddress(ctx context.Context, addr string) error {
	if t.cfg.TLS == nil {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w %q: %v", errBadAddress, addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return fmt.Errorf("%w %q: port %q", errBadAddress, addr, port)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && (ip.IsUnspecified() || ip.IsMulticast())) {
		return fmt.Errorf("%w %q: host %q is no address to reach it at", errBadAddress, addr, host)
	}
	p, ok := peer.FromContext(ctx)
	ai, tlsOK := p.AuthInfo.(certs.AuthInfo)
	if !ok || !tlsOK || len(ai.State.PeerCertificates) == 0 {
		return fmt.Errorf("%w: no certificate to check %s against", errNotChunkserver, addr)
	}
	if err := ai.State.PeerCertificates[0].VerifyHostname(host); err != nil {
		return fmt.Errorf("%w: %s may not register at %s: its certificate does not name %s", errNotChunkserver, ai.Identity, addr, host)
	}
	return nil
}

// checkRegister refuses the registration of addr by the peer of ctx: not
// a chunkserver, an address it cannot serve at, or one a live chunkserver
// of another certificate holds.
func (t *term) checkRegister(ctx context.Context, addr string) (string, error) {
	w, err := t.chunkserverPeer(ctx, "register")
	if err != nil {
		return "", err
	}
	if err := t.checkAddress(ctx, addr); err != nil {
		return "", err
	}
	if _, live := t.blocks.Registered(addr); live {
		if holder, ok := t.regs.of(addr); ok && holder != w {
			return "", fmt.Errorf("%w: %s is registered to %s, alive", errNotChunkserver, addr, holder)
		}
	}
	return w, nil
}

// Reports of bad replicas. A chunkserver's report of its own replica (its
// scrubber, its reads) is the chunkserver's verdict; any other report (a
// client that read around a replica, a chunkserver about another's) is a
// hint: the nameserver asks the replica's chunkserver to verify it
// (VerifyBlock) and marks it corrupt only if the chunkserver confirms.

// maxVerifications bounds the verifications in flight at once: each reads
// a whole replica. Hints beyond it are dropped (logged): a reader that
// really found a bad replica is not the only one to find it (the
// chunkserver's own reads and scrubber do too).
const maxVerifications = 4

// verifyTimeout is how long a verification may take: a block read at 4
// MiB/s, plus 10 s.
func verifyTimeout(size int64) time.Duration {
	return 10*time.Second + time.Duration(size/(4<<20))*time.Second
}

// ownReport reports whether the peer of ctx is the chunkserver holding the
// replica at addr (req names it as the reporter too).
func (t *term) ownReport(ctx context.Context, req *bfspb.ReportBadReplicasRequest, addr string) bool {
	if req.Address != addr {
		return false
	}
	if t.cfg.TLS == nil {
		return req.ChunkserverId != 0 // insecure: the report's own word
	}
	id, ok := certs.PeerIdentity(ctx)
	holder, registered := t.regs.of(addr)
	return ok && registered && id.IsChunkserver() && id.String() == holder
}

// verifyReplica asks the chunkserver at addr to check its replica of
// block; it reports whether the chunkserver found it corrupt.
func (t *term) verifyReplica(ctx context.Context, addr string, block int64) (bool, error) {
	select {
	case t.verifySlots <- struct{}{}:
		defer func() { <-t.verifySlots }()
	default:
		return false, fmt.Errorf("%d verifications in flight already", maxVerifications)
	}
	cl, err := t.chunkserver(addr)
	if err != nil {
		return false, err
	}
	var size int64
	if fb, err := t.ns.Block(block); err == nil {
		size = fb.Size
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), verifyTimeout(size))
	defer cancel()
	resp, err := cl.VerifyBlock(ctx, &bfspb.VerifyBlockRequest{BlockId: block, Term: t.num})
	switch {
	case err != nil:
		return false, err
	case resp.Status == bfspb.StatusCode_CORRUPT:
		return true, nil
	case resp.Status == bfspb.StatusCode_OK:
		return false, nil
	}
	return false, fmt.Errorf("%v: %s", resp.Status, resp.Message)
}

// unallocated remembers, for the term, when a block report first named
// each replica of a block id the namespace never allocated, by
// chunkserver: such a replica is deleted once the grace period has
// passed since.
type unallocated struct {
	mu    sync.Mutex
	first map[string]map[int64]time.Time
}

// seen records a sighting of block on addr at now and returns the first.
func (u *unallocated) seen(addr string, block int64, now time.Time) time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.first == nil {
		u.first = make(map[string]map[int64]time.Time)
	}
	m := u.first[addr]
	if m == nil {
		m = make(map[int64]time.Time)
		u.first[addr] = m
	}
	if t, ok := m[block]; ok {
		return t
	}
	m[block] = now
	return now
}

// forget drops what is known of block on addr.
func (u *unallocated) forget(addr string, block int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.first[addr], block)
}

// unallocatedDue reports whether the replica of block on addr, whose id
// the namespace never allocated, is to be deleted now: the grace period
// has passed since a report first named it out of safe mode.
func (t *term) unallocatedDue(addr string, block int64) bool {
	if t.cfg.UnallocatedGrace < 0 || t.safe.On() {
		return false
	}
	now := t.cfg.Clock.Now()
	first := t.unalloc.seen(addr, block, now)
	if now.Sub(first) < t.cfg.UnallocatedGrace {
		if first.Equal(now) {
			glog.Warningf("chunkserver %s holds block %d, which this namespace never allocated: deleting it after %v unless it is allocated by then",
				addr, block, t.cfg.UnallocatedGrace)
		}
		return false
	}
	return true
}

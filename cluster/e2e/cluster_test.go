package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/bfs-go/bfs/internal/blocktoken"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// cluster is a nameserver and chunkservers running as processes, each
// with its data under one temporary folder.
type cluster struct {
	t   *testing.T
	dir string
	ns  *process
	// nsAddr stays the nameserver's address across restarts: chunkservers
	// know no other.
	nsAddr string
	// nsFlags are extra flags of the nameserver.
	nsFlags []string
	cs      []*process // nil for a chunkserver that is down
	// csFlags are extra flags of every chunkserver; csExtra of one, by
	// index (a --data of volumes of its own, say).
	csFlags []string
	csExtra map[int][]string
	// csAddrs are the chunkservers' addresses, kept across restarts.
	csAddrs []string
	probes  int
}

// startCluster starts a nameserver (with nsFlags) and n chunkservers and
// waits until the chunkservers have registered.
func startCluster(t *testing.T, n int, nsFlags ...string) *cluster {
	t.Helper()
	return startClusterWith(t, n, nil, nsFlags...)
}

// startClusterWith is startCluster with csFlags for every chunkserver.
func startClusterWith(t *testing.T, n int, csFlags []string, nsFlags ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), nsFlags: nsFlags, csFlags: csFlags, cs: make([]*process, n), csAddrs: make([]string, n)}
	c.ns = c.startNameServer("127.0.0.1:0")
	c.nsAddr = c.ns.addr
	for i := range n {
		c.cs[i] = c.startChunkserver(i, "127.0.0.1:0")
		c.csAddrs[i] = c.cs[i].addr
	}
	c.waitChunkservers()
	return c
}

func (c *cluster) startNameServer(addr string) *process {
	c.t.Helper()
	args := []string{"nameserver", "--data", filepath.Join(c.dir, "nameserver"), "--listen", addr, "--metrics", ""}
	return startLoneNameServer(c.t, append(args, c.nsFlags...)...)
}

// startLoneNameServer starts a nameserver that is a group of one (bfs
// args...) and waits until it leads: it serves before it has won its
// election and begun its term, and until then every call answers
// NOT_LEADER.
func startLoneNameServer(t *testing.T, args ...string) *process {
	t.Helper()
	p := startDaemon(t, args...)
	ns := dialNameServer(t, p.addr)
	waitFor(t, 60*time.Second, "the nameserver to lead", func() bool {
		st, err := ns.GetSafeMode(ctxT(t, 10*time.Second), &bfspb.GetSafeModeRequest{})
		return err == nil && st.Status != bfspb.StatusCode_NOT_LEADER
	})
	return p
}

// startChunkserver starts chunkserver i with the cluster's csFlags and
// extra.
func (c *cluster) startChunkserver(i int, addr string, extra ...string) *process {
	c.t.Helper()
	args := []string{"chunkserver", "--data", filepath.Join(c.dir, fmt.Sprintf("chunkserver-%d", i)),
		"--listen", addr, "--metrics", "", "--nameserver", c.nsAddr, "--certs-dir", csCertsDir}
	return startDaemon(c.t, slices.Concat(args, c.csFlags, c.csExtra[i], extra)...)
}

// killNameServer kills the nameserver with SIGKILL.
func (c *cluster) killNameServer() { c.ns.kill() }

// restartNameServer starts the nameserver again on its data and address.
func (c *cluster) restartNameServer() { c.ns = c.startNameServer(c.nsAddr) }

// killChunkserver kills chunkserver i with SIGKILL.
func (c *cluster) killChunkserver(i int) {
	c.cs[i].kill()
	c.cs[i] = nil
}

// restartChunkserver starts chunkserver i again on its data and address.
func (c *cluster) restartChunkserver(i int) { c.cs[i] = c.startChunkserver(i, c.csAddrs[i]) }

// index returns the number of the chunkserver at addr.
func (c *cluster) index(addr string) int {
	c.t.Helper()
	i := slices.Index(c.csAddrs, addr)
	if i < 0 {
		c.t.Fatalf("%s is none of the chunkservers %v", addr, c.csAddrs)
	}
	return i
}

// waitChunkservers waits until every chunkserver has registered with the
// nameserver, which shows as a block being placed on all of them: a probe
// file is opened, given a block with one replica per chunkserver, and
// deleted (no byte is written).
func (c *cluster) waitChunkservers() {
	c.t.Helper()
	c.probes++
	probeChunkservers(c.t, dialNameServer(c.t, c.nsAddr), len(c.csAddrs), c.probes)
}

// probeChunkservers waits until n chunkservers have registered with the
// nameserver ns, which shows as a block being placed on all of them: a
// probe file (number probe) is opened, given a block with n replicas,
// and deleted (no byte is written).
func probeChunkservers(t *testing.T, ns bfspb.NameServerClient, n, probe int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A nameserver serves (its health says so) before it has won the
	// election of its group of one: NOT_LEADER until then.
	var sess *bfspb.OpenSessionResponse
	waitFor(t, 60*time.Second, "the nameserver to lead", func() bool {
		var err error
		sess, err = ns.OpenSession(ctx, &bfspb.OpenSessionRequest{Holder: "e2e-probe", TtlMs: 30_000})
		if err == nil && sess.Status != bfspb.StatusCode_OK && sess.Status != bfspb.StatusCode_NOT_LEADER {
			t.Fatalf("probe session: %v", sess)
		}
		return err == nil && sess.Status == bfspb.StatusCode_OK
	})
	path := fmt.Sprintf("/e2e-probe-%d", probe)
	cr, err := ns.Create(ctx, &bfspb.CreateRequest{Path: path, SessionId: sess.SessionId, OpenForWrite: true,
		Replication: uint32(n)})
	if err != nil || cr.Status != bfspb.StatusCode_OK {
		t.Fatalf("probe create: %v %v", cr, err)
	}
	waitFor(t, 60*time.Second, "every chunkserver to register", func() bool {
		r, err := ns.AddBlock(ctx, &bfspb.AddBlockRequest{Path: path, SessionId: sess.SessionId})
		return err == nil && r.Status == bfspb.StatusCode_OK
	})
	if r, err := ns.DeleteFile(ctx, &bfspb.DeleteFileRequest{Path: path, SessionId: sess.SessionId}); err != nil || r.Status != bfspb.StatusCode_OK {
		t.Fatalf("probe delete: %v %v", r, err)
	}
	ns.CloseSession(ctx, &bfspb.CloseSessionRequest{SessionId: sess.SessionId})
}

// nameservers is the --nameserver of the tablet servers.
func (c *cluster) nameservers() string { return c.nsAddr }

// client returns an SDK client of the cluster, closed at the end of the
// test.
func (c *cluster) client(opts ...sdk.Option) *sdk.Client {
	c.t.Helper()
	cl, err := sdk.Dial(context.Background(), c.nsAddr, append([]sdk.Option{sdk.WithCertsDir(certsDir, certs.ClientUser)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

func dialNameServer(t *testing.T, addr string) bfspb.NameServerClient {
	t.Helper()
	return bfspb.NewNameServerClient(dialConn(t, addr))
}

func dialChunkserver(t *testing.T, addr string) bfspb.ChunkServerClient {
	t.Helper()
	return bfspb.NewChunkServerClient(dialConn(t, addr))
}

func dialConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(certs.TransportCredentials(clientCreds)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// replica is what one chunkserver holds of a block.
type replica struct {
	addr   string
	size   int64
	sealed bool
	data   []byte
}

// readReplica asks the chunkserver at addr about block (of the file path)
// and reads all of its replica, through the chunkserver's own RPCs, with
// the read token the nameserver at nsAddr gives for path (no SDK).
func readReplica(t *testing.T, nsAddr, path, addr string, block int64) replica {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	loc, err := dialNameServer(t, nsAddr).GetFileLocation(ctx, &bfspb.GetFileLocationRequest{Path: path})
	if err != nil || loc.Status != bfspb.StatusCode_OK || len(loc.Blocks) != 1 || loc.Blocks[0].BlockId != block {
		t.Fatalf("location of %s (block %d): %v %v", path, block, loc, err)
	}
	if ctx, err = blocktoken.Attach(ctx, loc.Blocks[0].Token); err != nil {
		t.Fatal(err)
	}
	cs := dialChunkserver(t, addr)
	info, err := cs.GetBlockInfo(ctx, &bfspb.GetBlockInfoRequest{BlockId: block})
	if err != nil || info.Status != bfspb.StatusCode_OK {
		t.Fatalf("block %d on %s: %v %v", block, addr, info, err)
	}
	r := replica{addr: addr, size: info.Size, sealed: info.Sealed}
	if info.Size == 0 {
		return r
	}
	stream, err := cs.Read(ctx, &bfspb.ReadRequest{BlockId: block})
	if err != nil {
		t.Fatalf("read block %d on %s: %v", block, addr, err)
	}
	var buf bytes.Buffer
	for {
		chunk, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read block %d on %s: %v", block, addr, err)
		}
		if chunk.Status != bfspb.StatusCode_OK {
			t.Fatalf("read block %d on %s at %d: %v %s", block, addr, chunk.Offset, chunk.Status, chunk.Message)
		}
		if chunk.Offset != int64(buf.Len()) {
			t.Fatalf("read block %d on %s: chunk at %d after %d bytes", block, addr, chunk.Offset, buf.Len())
		}
		buf.Write(chunk.Data)
	}
	r.data = buf.Bytes()
	if int64(len(r.data)) != r.size {
		t.Fatalf("block %d on %s: read %d bytes of %d", block, addr, len(r.data), r.size)
	}
	return r
}

// readFile reads the whole file path through the SDK.
func readFile(t *testing.T, c *sdk.Client, path string) []byte {
	t.Helper()
	b, err := tryReadFile(c, path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b
}

func tryReadFile(c *sdk.Client, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := c.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// locate returns the single block of the file path.
func locate(t *testing.T, c *sdk.Client, path string) (*sdk.Location, sdk.BlockLocation) {
	t.Helper()
	loc, err := c.Locate(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if len(loc.Blocks) != 1 {
		t.Fatalf("%s has %d blocks, want 1", path, len(loc.Blocks))
	}
	return loc, loc.Blocks[0]
}

// firstDiff returns the first offset where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// requireBytes fails the test unless got is want, saying where they part.
func requireBytes(t *testing.T, want, got []byte, format string, args ...any) {
	t.Helper()
	if i := firstDiff(want, got); i >= 0 {
		t.Fatalf("%s: %d bytes, want %d; they differ from offset %d", fmt.Sprintf(format, args...), len(got), len(want), i)
	}
}

// ctxT is a context for one step of a test.
func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

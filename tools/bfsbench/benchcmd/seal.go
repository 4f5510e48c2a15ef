package benchcmd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bfs-go/bfs/internal/bench"
	"github.com/bfs-go/bfs/proto/bfspb"
	"github.com/bfs-go/bfs/sdk"
)

// Every sealed block has sealSynced bytes written and synced, then one
// full SDK packet (256 KiB: a smaller write stays in the client's buffer)
// written and not synced, so that the Seal meets a write in flight.
const (
	sealSynced   = 64 << 10
	sealUnsynced = 256 << 10
)

type sealOptions struct{ blocks int }

func defaultSealOptions() sealOptions { return sealOptions{blocks: 1000} }

func (o *sealOptions) register(f *pflag.FlagSet, prefix string) {
	f.IntVar(&o.blocks, prefix+"blocks", o.blocks, "blocks to seal, one after the other")
}

func (o *sealOptions) validate(prefix string) error {
	if o.blocks < 1 {
		return fmt.Errorf("--%sblocks must be at least 1, got %d", prefix, o.blocks)
	}
	return nil
}

func newSealCmd(c *common) *cobra.Command {
	o := defaultSealOptions()
	cmd := &cobra.Command{
		Use:   "seal",
		Short: "Seal latency: Seal sent to every replica of a block being written → the nameserver has BlockReceived from all and closed the file",
		Args:  cobra.NoArgs,
	}
	o.register(cmd.Flags(), "")
	c.benchCommand(cmd, func() error { return o.validate("") }, o.run, sealChart)
	return cmd
}

const (
	sealNote    = "Seal sent (in parallel, as the nameserver's closer does) to the 3 replicas of a block with 64 KiB synced and a 256 KiB packet in flight → the nameserver has BlockReceived from all 3 and has committed the file's close; observed with FinishFile(wait), which the nameserver answers on that event (no polling); includes that one RPC's round trip and the close's Pebble commit"
	sealRPCNote = "one replica's Seal RPC round trip: the chunkserver fences the writer, fdatasyncs, persists the sealed length, queues BlockReceived and answers"
)

// sealBench seals blocks one at a time.
type sealBench struct {
	c      *common
	client *sdk.Client
	ns     bfspb.NameServerClient
	// asNS reaches the chunkservers with the nameservers' certificate,
	// and term is the leader's: a Seal is the nameserver's command.
	asNS *rawConns
	term uint64
	dir  string
}

func (o *sealOptions) run(ctx context.Context, c *common, cl *cluster) ([]bench.Result, error) {
	client, err := sdk.Dial(ctx, cl.addr, cl.creds())
	if err != nil {
		return nil, err
	}
	defer client.Close()
	raw, err := cl.raw()
	if err != nil {
		return nil, err
	}
	defer raw.close()
	ns, err := raw.nameserver(cl.addr)
	if err != nil {
		return nil, err
	}
	asNS, err := cl.rawAsNameServer()
	if err != nil {
		return nil, err
	}
	defer asNS.close()
	st, err := ns.ClusterStatus(ctx, &bfspb.ClusterStatusRequest{})
	if err != nil {
		return nil, err
	}
	b := &sealBench{c: c, client: client, ns: ns, asNS: asNS, term: st.Term, dir: c.root() + "/seal"}
	if err := client.MkdirAll(ctx, b.dir, 0o755); err != nil {
		return nil, err
	}
	c.progressf("sealing %d blocks, one at a time...", o.blocks)
	var closed, rpcs []time.Duration
	var errs int64
	var firstErr error
	for i := range o.blocks {
		if i > 0 && i%100 == 0 {
			c.progressf("sealed %d blocks", i)
		}
		d, perReplica, err := b.sealOne(ctx, i)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			errs++
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		closed = append(closed, d)
		rpcs = append(rpcs, perReplica...)
	}
	if firstErr != nil {
		c.progressf("seal: %d of %d blocks failed; first: %v", errs, o.blocks, firstErr)
	}
	if len(closed) == 0 {
		return nil, fmt.Errorf("seal: every block failed: %w", firstErr)
	}
	r1 := bench.Summarize("seal→closed", 1, closed, errs)
	r1.Note = sealNote
	r2 := bench.Summarize("seal RPC", 1, rpcs, 0)
	r2.Note = sealRPCNote
	return []bench.Result{r1, r2}, nil
}

// sealOne writes block i, seals it while a packet is in flight and returns
// the time until the nameserver closed the file, and each Seal RPC's.
func (b *sealBench) sealOne(ctx context.Context, i int) (time.Duration, []time.Duration, error) {
	path := fmt.Sprintf("%s/b%d", b.dir, i)
	w, err := b.client.Create(ctx, path, sdk.Replication(3))
	if err != nil {
		return 0, nil, err
	}
	defer w.CloseContext(ctx) // fails once sealed; see the check below
	data := make([]byte, sealSynced+sealUnsynced)
	if _, err := w.Write(data[:sealSynced]); err != nil {
		return 0, nil, err
	}
	if err := w.Sync(ctx); err != nil {
		return 0, nil, err
	}
	loc, err := b.client.Locate(ctx, path)
	if err != nil {
		return 0, nil, err
	}
	if len(loc.Blocks) != 1 || len(loc.Blocks[0].Replicas) == 0 {
		return 0, nil, fmt.Errorf("seal %s: located %d blocks", path, len(loc.Blocks))
	}
	sess, err := b.client.Session(ctx)
	if err != nil {
		return 0, nil, err
	}
	if _, err := w.Write(data[sealSynced:]); err != nil {
		return 0, nil, err
	}
	d, rpcs, err := b.seal(ctx, path, sess.ID(), loc.Blocks[0])
	if err != nil {
		return 0, nil, err
	}
	// The writer was fenced: its close must fail.
	if err := w.CloseContext(ctx); err == nil {
		return 0, nil, fmt.Errorf("seal %s: %w: its Close succeeded after the seal", path, errFenceBroken)
	}
	return d, rpcs, nil
}

// seal sends Seal to every replica of blk and waits, with FinishFile(wait)
// under the writer's session, until the nameserver has closed the file.
func (b *sealBench) seal(ctx context.Context, path, session string, blk sdk.BlockLocation) (time.Duration, []time.Duration, error) {
	rpcs := make([]time.Duration, len(blk.Replicas))
	errs := make([]error, len(blk.Replicas))
	var wg sync.WaitGroup
	start := time.Now()
	for k, addr := range blk.Replicas {
		wg.Go(func() {
			cs, err := b.asNS.chunkserver(addr)
			if err != nil {
				errs[k] = err
				return
			}
			resp, err := cs.Seal(ctx, &bfspb.SealRequest{BlockId: blk.ID, Term: b.term})
			rpcs[k] = time.Since(start)
			if err == nil && resp.Status != bfspb.StatusCode_OK {
				err = fmt.Errorf("seal block %d on %s: %v", blk.ID, addr, resp.Status)
			}
			errs[k] = err
		})
	}
	resp, err := b.ns.FinishFile(ctx, &bfspb.FinishFileRequest{Path: path, SessionId: session, Wait: true})
	d := time.Since(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, nil, err
	}
	if err == nil && resp.Status != bfspb.StatusCode_OK {
		err = fmt.Errorf("finish %s: %v %s", path, resp.Status, resp.Message)
	}
	if err != nil {
		return 0, nil, err
	}
	if info := resp.Info; info.GetWriterSession() != "" || info.GetSize() < sealSynced {
		return 0, nil, fmt.Errorf("seal %s: after the seal the file has %d bytes (open: %v), want ≥ %d synced, closed",
			path, info.GetSize(), info.GetWriterSession() != "", sealSynced)
	}
	return d, rpcs, nil
}

// errFenceBroken marks a writer that could go on writing after it was
// fenced: the measurement is void and the cluster is broken.
var errFenceBroken = errors.New("writer not fenced")

package sdk

import (
	"context"
	"fmt"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// FsckBlock is a block fsck found at risk.
type FsckBlock struct {
	ID   int64
	Size int64
	// Replicas are the replicas that count: good (sealed at the block's
	// length, on a volume in service, not known corrupt) and not on a
	// draining chunkserver. Corrupt are those marked corrupt, Draining
	// the good ones on draining chunkservers, Stale those that are no
	// full copy (unsealed, or sealed at another length).
	Replicas, Corrupt, Draining, Stale []string
	// UnderReplicated: fewer counting replicas than the file's
	// replication, at least one good replica left.
	UnderReplicated bool
	// OverReplicated: more counting replicas than the replication.
	OverReplicated bool
	// Missing: no good replica: nobody can read the block.
	Missing bool
}

// FsckFile is a file with blocks at risk.
type FsckFile struct {
	Path        string
	Replication int
	Size        int64
	// Open: the file is open for write; its last block is not judged.
	Open   bool
	Blocks []FsckBlock
}

// FsckTotals adds up what fsck walked.
type FsckTotals struct {
	Files, Dirs, Bytes, Blocks                          int64
	UnderReplicatedBlocks, MissingBlocks, CorruptBlocks int64
	OverReplicatedBlocks                                int64
	OpenFiles                                           int64
	// SafeMode: the nameserver was in safe mode during the walk, so a
	// block may look missing whose replicas are not reported yet.
	SafeMode bool
}

// Healthy reports whether every block has a good replica.
func (t FsckTotals) Healthy() bool { return t.MissingBlocks == 0 }

func (t *FsckTotals) add(w *bfspb.FsckTotals) {
	t.Files += w.GetFiles()
	t.Dirs += w.GetDirs()
	t.Bytes += w.GetBytes()
	t.Blocks += w.GetBlocks()
	t.UnderReplicatedBlocks += w.GetUnderReplicatedBlocks()
	t.MissingBlocks += w.GetMissingBlocks()
	t.CorruptBlocks += w.GetCorruptBlocks()
	t.OverReplicatedBlocks += w.GetOverReplicatedBlocks()
	t.OpenFiles += w.GetOpenFiles()
}

// Fsck checks every file at or under path against the replicas the
// nameserver knows of, calling each with the files that have blocks
// under-replicated, missing or with a corrupt replica, in path order, as
// the nameserver walks the tree a stretch per request. It returns the
// totals of the whole walk. An error from each stops the walk and is
// returned.
func (c *Client) Fsck(ctx context.Context, path string, each func(FsckFile) error) (FsckTotals, error) {
	var totals FsckTotals
	p, err := cleanPath(path)
	if err != nil {
		return totals, pathError("fsck", path, err)
	}
	for token := ""; ; {
		if err := c.checkOpen(); err != nil {
			return totals, err
		}
		resp, err := c.ns.Fsck(ctx, &bfspb.FsckRequest{Path: p, PageToken: token})
		if err != nil {
			return totals, pathError("fsck", path, transportError(ctx, err))
		}
		if err := responseError(resp); err != nil {
			return totals, pathError("fsck", path, err)
		}
		totals.add(resp.GetTotals())
		totals.SafeMode = totals.SafeMode || resp.SafeMode
		for _, f := range resp.Files {
			if err := each(fsckFileFromWire(f)); err != nil {
				return totals, err
			}
		}
		if resp.NextPageToken == "" {
			return totals, nil
		}
		if resp.NextPageToken == token {
			return totals, fmt.Errorf("fsck %s: %w: the nameserver's walk did not move past its page token", path, ErrInternal)
		}
		token = resp.NextPageToken
	}
}

func fsckFileFromWire(f *bfspb.FsckFile) FsckFile {
	out := FsckFile{Path: f.Path, Replication: int(f.Replication), Size: f.Size, Open: f.Open}
	for _, b := range f.Blocks {
		out.Blocks = append(out.Blocks, FsckBlock{ID: b.BlockId, Size: b.Size, Replicas: b.Replicas,
			Corrupt: b.Corrupt, Draining: b.Draining, Stale: b.Stale, UnderReplicated: b.UnderReplicated,
			OverReplicated: b.OverReplicated, Missing: b.Missing})
	}
	return out
}

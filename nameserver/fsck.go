package nameserver

import (
	"context"

	"github.com/bfs-go/bfs/internal/fspath"
	"github.com/bfs-go/bfs/nameserver/blockmap"
	"github.com/bfs-go/bfs/proto/bfspb"
)

const (
	// tokenFsck names the Fsck page tokens (listing.go): the path the
	// walk resumes after.
	tokenFsck = 'f'
	// fsckPageScan bounds the entries one page of Fsck walks, so that a
	// healthy tree of millions of files is checked a stretch at a time
	// rather than in one long call.
	fsckPageScan = 1 << 14
)

// Fsck checks one stretch of the namespace under a path: every block of
// every file against the block map. See FsckResponse.
func (srv *Server) Fsck(ctx context.Context, req *bfspb.FsckRequest) (*bfspb.FsckResponse, error) {
	s, notLeader := leading[*bfspb.FsckResponse](srv, ctx)
	if s == nil {
		return notLeader, nil
	}
	err := s.verify()
	var resp *bfspb.FsckResponse
	if err == nil {
		resp, err = s.fsck(req)
	}
	if err != nil {
		code, msg := statusOf(err)
		return &bfspb.FsckResponse{Status: code, Message: msg}, nil
	}
	return resp, nil
}

func (s *term) fsck(req *bfspb.FsckRequest) (*bfspb.FsckResponse, error) {
	root := req.Path
	if root == "" {
		root = "/"
	}
	p, err := cleanPath(root)
	if err != nil {
		return nil, err
	}
	after, err := parsePageToken(tokenFsck, req.PageToken)
	if err != nil {
		return nil, err
	}
	if after != "" && !fspath.Within(after, p) {
		return nil, namespaceInvalid("bad page token: it continues the fsck of another path")
	}
	resp := &bfspb.FsckResponse{Totals: &bfspb.FsckTotals{}, SafeMode: s.safe.On()}
	limit := pageSize(req.PageSize)
	var budget pageBudget
	var last string
	scanned, stopped := 0, false
	err = s.ns.Walk(p, after, func(path string, info *bfspb.FileInfo) bool {
		if scanned == fsckPageScan || len(resp.Files) == limit {
			stopped = true
			return false
		}
		if info.Type == bfspb.FileType_FILE_TYPE_DIR {
			resp.Totals.Dirs++
		} else {
			f, t := s.checkFile(path, info)
			if f != nil && !budget.fits(f) {
				stopped = true
				return false
			}
			if f != nil {
				resp.Files = append(resp.Files, f)
			}
			addTotals(resp.Totals, t)
		}
		scanned++
		last = path
		return true
	})
	if err != nil {
		return nil, err
	}
	if stopped {
		resp.NextPageToken = pageToken(tokenFsck, last)
	}
	return resp, nil
}

// checkFile judges the blocks of the file at path. It returns the file
// with its affected blocks, or nil if none is, and what it adds to the
// totals. The last block of a file open for write is still being written
// and is not judged.
func (s *term) checkFile(path string, info *bfspb.FileInfo) (*bfspb.FsckFile, *bfspb.FsckTotals) {
	open := info.WriterSession != ""
	t := &bfspb.FsckTotals{Files: 1, Bytes: info.Size, Blocks: int64(len(info.Blocks))}
	if open {
		t.OpenFiles = 1
	}
	f := &bfspb.FsckFile{Path: path, Replication: info.Replication, Size: info.Size, Open: open}
	for i, b := range info.Blocks {
		if open && i == len(info.Blocks)-1 {
			continue
		}
		fb := s.checkBlock(b, info.Replication)
		if fb.Missing {
			t.MissingBlocks++
		}
		if fb.UnderReplicated {
			t.UnderReplicatedBlocks++
		}
		if fb.OverReplicated {
			t.OverReplicatedBlocks++
		}
		if len(fb.Corrupt) > 0 {
			t.CorruptBlocks++
		}
		if fb.Missing || fb.UnderReplicated || fb.OverReplicated || len(fb.Corrupt) > 0 || len(fb.Stale) > 0 {
			f.Blocks = append(f.Blocks, fb)
		}
	}
	if len(f.Blocks) == 0 {
		return nil, t
	}
	return f, t
}

// checkBlock sorts the replicas of b on live chunkservers by the one
// definition of a good replica (blockmap.ReplicaState.Good): those that
// count, the corrupt, the good ones on draining chunkservers, and the
// stale (no full copy). A block with no good replica is missing.
func (s *term) checkBlock(b *bfspb.BlockMeta, replication uint32) *bfspb.FsckBlock {
	fb := &bfspb.FsckBlock{BlockId: b.Id, Size: b.Size}
	good := 0
	for _, r := range s.blocks.States(blockmap.BlockID(b.Id)) {
		switch {
		case r.Corrupt:
			fb.Corrupt = append(fb.Corrupt, r.Addr)
		case !r.Good(b.Size):
			fb.Stale = append(fb.Stale, r.Addr)
		case r.Draining:
			fb.Draining = append(fb.Draining, r.Addr)
			good++
		default:
			fb.Replicas = append(fb.Replicas, r.Addr)
			good++
		}
	}
	fb.Missing = good == 0
	fb.UnderReplicated = !fb.Missing && len(fb.Replicas) < int(replication)
	fb.OverReplicated = len(fb.Replicas) > int(replication)
	return fb
}

func addTotals(sum, t *bfspb.FsckTotals) {
	sum.Files += t.Files
	sum.Dirs += t.Dirs
	sum.Bytes += t.Bytes
	sum.Blocks += t.Blocks
	sum.UnderReplicatedBlocks += t.UnderReplicatedBlocks
	sum.MissingBlocks += t.MissingBlocks
	sum.CorruptBlocks += t.CorruptBlocks
	sum.OverReplicatedBlocks += t.OverReplicatedBlocks
	sum.OpenFiles += t.OpenFiles
}

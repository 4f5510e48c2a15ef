package chunkserver

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/chunkserver/volume"
	"github.com/bfs-go/bfs/internal/clock"
)

// scrubPositionFile, in the data directory, holds the id of the last
// replica the scrubber verified, so that a restart resumes after it.
const scrubPositionFile = "SCRUB_POSITION"

// The scrubber persists its position every scrubSaveBlocks replicas or
// scrubSaveInterval, whichever comes first, and at the end of a pass.
const (
	scrubSaveBlocks   = 64
	scrubSaveInterval = 30 * time.Second
)

// scrubMinPass is the least time from the start of a pass to the start of
// the next, so that a store holding little is not verified over and over.
const scrubMinPass = time.Hour

// scrubPiece is how much the scrubber reads at a time (a whole number of
// checksum chunks); it sleeps after each piece to hold its rate.
const scrubPiece = 1 << 20

// scrubber verifies the checksums of every sealed replica, in block-id
// order, at no more than rate bytes per second; a pass that reaches the
// last replica starts again from the first (no sooner than scrubMinPass
// after the previous pass started). A replica that fails is marked
// corrupt in the store (its reads answer CORRUPT) and handed to corrupt.
type scrubber struct {
	// vol is the volume it scrubs, through vols (whose reads check the
	// volume when they fail); it stops when the volume fails.
	vol     *volume.Volume
	vols    *volume.Set
	clock   clock.Clock
	metrics *metrics
	dataDir string
	rate    int64 // bytes per second, > 0
	// corrupt, if set, is told of every replica found corrupt (the
	// nameserver report); it must not block.
	corrupt func(id blockstore.BlockID, reason string)

	// pos is the last replica verified (0: none in this pass); lastSave
	// when pos was last persisted, saved how many replicas ago.
	pos      blockstore.BlockID
	lastSave time.Time
	unsaved  int
}

// run scrubs until ctx ends or the volume fails.
func (s *scrubber) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.vol.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	s.pos = loadScrubPosition(s.dataDir)
	s.lastSave = s.clock.Now()
	for {
		start := s.clock.Now()
		if !s.pass(ctx) {
			s.save()
			return
		}
		if rest := scrubMinPass - s.clock.Now().Sub(start); rest > 0 && !clock.Sleep(ctx, s.clock, rest) {
			return
		}
	}
}

// pass verifies the sealed replicas after s.pos, then sets the next pass
// to start at the first replica. It returns false if ctx ended first.
func (s *scrubber) pass(ctx context.Context) bool {
	s.metrics.scrubPassStart.Set(float64(s.clock.Now().Unix()))
	for _, info := range s.vol.Store().List() {
		if info.ID <= s.pos || !info.Sealed {
			continue
		}
		if !s.verify(ctx, info) {
			return false
		}
		s.pos = info.ID
		s.metrics.scrubPosition.Set(float64(s.pos))
		s.unsaved++
		if s.unsaved >= scrubSaveBlocks || s.clock.Now().Sub(s.lastSave) >= scrubSaveInterval {
			s.save()
		}
	}
	s.pos = 0
	s.metrics.scrubPasses.Inc()
	s.save()
	return true
}

// verify reads the replica a piece at a time (every read checks the
// checksums of the chunks it covers), sleeping after each piece to hold
// the rate. It returns false if ctx ended first.
func (s *scrubber) verify(ctx context.Context, info blockstore.BlockInfo) bool {
	buf := make([]byte, scrubPiece)
	for off := int64(0); off < info.Size; off += scrubPiece {
		n, err := s.vols.ReadAt(info.ID, buf, off)
		if err != nil && !errors.Is(err, io.EOF) {
			if errors.Is(err, blockstore.ErrCorrupt) {
				s.found(info.ID, err)
			} else if !errors.Is(err, blockstore.ErrNotFound) && !errors.Is(err, blockstore.ErrClosed) && !errors.Is(err, blockstore.ErrInvalid) &&
				!errors.Is(err, volume.ErrVolumeFailed) {
				glog.Warningf("scrubber: block %d: %v", info.ID, err)
			}
			return ctx.Err() == nil // deleted, truncated or corrupt: next replica
		}
		s.metrics.scrubBytes.Add(float64(n))
		if !clock.Sleep(ctx, s.clock, time.Duration(int64(n)*int64(time.Second)/s.rate)) {
			return false
		}
	}
	s.metrics.scrubReplicas.Inc()
	return true
}

// found marks a replica corrupt and reports it. A replica marked already
// is reported again (every pass), so a nameserver that restarted learns
// of it too; it is logged and counted once.
func (s *scrubber) found(id blockstore.BlockID, err error) {
	if !s.vols.Corrupt(id) {
		if merr := s.vols.MarkCorrupt(id); merr != nil {
			return // deleted meanwhile
		}
		glog.Errorf("scrubber: %v", err)
		s.metrics.scrubCorrupt.Inc()
	}
	if s.corrupt != nil {
		s.corrupt(id, err.Error())
	}
}

func (s *scrubber) save() {
	s.lastSave, s.unsaved = s.clock.Now(), 0
	if err := writeFileSync(s.dataDir, scrubPositionFile, []byte(strconv.FormatInt(int64(s.pos), 10)+"\n")); err != nil {
		glog.Warningf("scrubber: saving position: %v", err)
	}
}

// loadScrubPosition returns the persisted position; 0 (a new pass) when
// there is none or it cannot be read.
func loadScrubPosition(dir string) blockstore.BlockID {
	b, err := os.ReadFile(filepath.Join(dir, scrubPositionFile))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			glog.Warningf("scrubber: %v: starting a new pass", err)
		}
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		glog.Warningf("scrubber: %s: bad position %q: starting a new pass", scrubPositionFile, b)
		return 0
	}
	return blockstore.BlockID(n)
}

package bfscmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/bfs-go/bfs/nameserver"
)

// testingPause is the hidden --testing-pause-file flag of bfs nameserver,
// a seam for the end-to-end tests (cluster/e2e, which kill a leader in
// each phase of a cleaning): while the file exists, the nameserver holds
// the cleanings at the point the file names, prints
//
//	testing: paused at POINT (DETAIL)
//
// on stdout, and waits until the file is gone or names another point (or
// the leadership term ends). The points:
//
//	seal N   the seals of a block after its first N (seal 0: before any)
//	close    a file every replica has reported sealed, before its close
//	         is decided and committed
//	unlock   a cleaning whose files are all closed and their replicas
//	         cut to the agreed length, before UNLOCKED is proposed
//
// Nothing of it runs without the flag; it is hidden from --help.
type testingPause struct {
	file string
	out  io.Writer
	mu   sync.Mutex
	// seals counts the seals of each block asked so far.
	seals map[int64]int
}

// pausePoll is how often a held point looks at the file again.
const pausePoll = 20 * time.Millisecond

func addTestingPauseFlag(f *pflag.FlagSet, p *testingPause) {
	f.StringVar(&p.file, "testing-pause-file", "", "tests only: hold cleanings at the point this file names while it exists")
	_ = f.MarkHidden("testing-pause-file") // the flag was just added
}

// install sets the knobs of cfg, if the flag was given.
func (p *testingPause) install(cfg *nameserver.Config, out io.Writer) {
	if p.file == "" {
		return
	}
	p.out, p.seals = out, map[int64]int{}
	k := &cfg.TestingKnobs
	k.BeforeSeal = func(ctx context.Context, addr string, block int64) {
		p.mu.Lock()
		n := p.seals[block]
		p.seals[block]++
		p.mu.Unlock()
		p.hold(ctx, func(point string) bool {
			limit, ok := strings.CutPrefix(point, "seal ")
			max, err := strconv.Atoi(limit)
			return ok && err == nil && n >= max
		}, fmt.Sprintf("seal of block %d on %s", block, addr))
	}
	k.BeforeClose = func(entry uint64) {
		p.hold(context.Background(), is("close"), fmt.Sprintf("close of file %d", entry))
	}
	k.BeforeFinishCleaning = func(ctx context.Context, path string) {
		p.hold(ctx, is("unlock"), "UNLOCKED of "+path)
	}
}

func is(want string) func(string) bool { return func(point string) bool { return point == want } }

// point is what the file names ("" if it does not exist).
func (p *testingPause) point() string {
	b, err := os.ReadFile(p.file)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// hold waits while at(point) holds of the point the file names.
func (p *testingPause) hold(ctx context.Context, at func(string) bool, what string) {
	point := p.point()
	if !at(point) {
		return
	}
	fmt.Fprintf(p.out, "testing: paused at %s (%s)\n", point, what)
	tick := time.NewTicker(pausePoll)
	defer tick.Stop()
	for at(p.point()) {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

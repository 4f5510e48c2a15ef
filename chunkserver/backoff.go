package chunkserver

import (
	"math/rand/v2"
	"time"
)

// backoff yields retry delays that double from min to max, with jitter
// so that chunkservers retrying after a nameserver restart spread out.
type backoff struct {
	min, max, cur time.Duration
}

func newBackoff(min, max time.Duration) *backoff { return &backoff{min: min, max: max, cur: min} }

// next returns a delay in [cur/2, cur) and doubles cur up to max.
func (b *backoff) next() time.Duration {
	d := b.cur/2 + rand.N(b.cur/2+1)
	b.cur = min(2*b.cur, b.max)
	return d
}

func (b *backoff) reset() { b.cur = b.min }

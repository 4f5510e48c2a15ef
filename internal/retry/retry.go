package retry

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/bfs-go/bfs/internal/clock"
)

// New returns a backoff whose delays double from min up to max: the
// n-th delay (from 0) is drawn uniformly from [d/2, d], where d is
// min·2ⁿ capped at max, until Reset.
//
// The library draws each delay around its current interval i, from
// [i·(1-f), i·(1+f)] with f its RandomizationFactor, and caps i (not the
// delay) at MaxInterval. An interval of 3d/4 with f = 1/3 gives [d/2, d],
// so no delay exceeds max.
func New(min, max time.Duration) *backoff.ExponentialBackOff {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     min * 3 / 4,
		RandomizationFactor: 1.0 / 3,
		Multiplier:          2,
		MaxInterval:         max * 3 / 4,
	}
	b.Reset()
	return b
}

// Sleep waits b's next delay on c. It returns false if ctx ends first.
func Sleep(ctx context.Context, c clock.Clock, b backoff.BackOff) bool {
	return clock.Sleep(ctx, c, b.NextBackOff())
}

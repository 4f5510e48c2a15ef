package sdk

import "github.com/bfs-go/bfs/internal/clock"

// WithClock makes the Client take time and timers from clk, so a test can
// drive the session's renewals and its loss with a fake clock. It is only
// compiled into the package's tests.
func WithClock(clk clock.Clock) Option {
	return func(o *options) { o.clock = clk }
}

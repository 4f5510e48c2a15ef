package chunkserver

import (
	"sync/atomic"
	"time"

	"github.com/bfs-go/bfs/internal/clock"
)

// clientIdle is how long after its last client stream ended a
// chunkserver counts its clients idle: a writer putting file after file
// leaves gaps shorter than that between its streams.
const clientIdle = time.Second

// clients tracks the client streams (writes, and reads other than a
// repair's copies) a chunkserver serves, so that copies yield to them.
// It is safe for concurrent use.
type clients struct {
	clock clock.Clock
	open  atomic.Int64
	// last is when the last stream ended, in Unix nanoseconds.
	last atomic.Int64
}

// start counts a client stream in; the func it returns counts it out.
func (c *clients) start() (end func()) {
	c.open.Add(1)
	return func() {
		c.last.Store(c.clock.Now().UnixNano())
		c.open.Add(-1)
	}
}

// busy reports whether a client stream is open, or one ended less than
// clientIdle ago.
func (c *clients) busy() bool {
	return c.open.Load() > 0 || c.clock.Now().UnixNano()-c.last.Load() < int64(clientIdle)
}

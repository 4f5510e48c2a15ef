// Package millis converts the integer milliseconds of the wire protocol
// (ttl_ms, heartbeat_interval_ms, ...) to time.Duration. A plain
// time.Duration(ms)*time.Millisecond wraps silently for values whose
// nanoseconds do not fit in an int64 (18446744075710 ms becomes about two
// seconds); Duration refuses them instead, and each caller answers with
// its own error.
package millis

import (
	"math"
	"time"
)

// Max is the largest number of milliseconds a time.Duration holds.
const Max = math.MaxInt64 / int64(time.Millisecond)

// Duration returns ms milliseconds as a time.Duration, and false if the
// value is beyond ±Max, which no time.Duration can hold.
func Duration(ms int64) (time.Duration, bool) {
	if ms > Max || ms < -Max {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

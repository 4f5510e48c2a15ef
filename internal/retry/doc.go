// Package retry is the one backoff the SDK and the daemons retry with:
// github.com/cenkalti/backoff/v5's exponential backoff, set up so that
// delays double from a minimum to a maximum with jitter, and waited for
// on an injected clock.
//
// Jitter matters more than the curve: a nameserver restart makes every
// chunkserver (and every session's lock watch) retry at once, and delays
// drawn at random spread them out instead of sending them back in
// lockstep.
//
// The library's own Retry waits on real time only (its timer cannot be
// replaced), so the loops here take delays from the BackOff and wait on
// their clock.Clock, which tests drive with a fake clock.
//
// A BackOff is not safe for concurrent use: each retry loop has its own.
package retry

package session

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ID names a session. Manager issues 32 hex digits from 16 random bytes, so
// an ID cannot be guessed: holding it is what entitles a client to act for
// the session.
type ID string

// Session is what is known about a session, and what Store persists.
// Its deadline is deliberately not part of it: deadlines live only in
// memory, on this process's monotonic clock.
type Session struct {
	ID     ID
	Holder string        // who opened it, for display and audit
	TTL    time.Duration // lifetime granted by each Grant or Renew
	Opened time.Time     // wall clock, for display only; never used for expiry
	// Owner is the identity that opened it, as the nameserver names
	// identities: only the owner may use the session. Empty for a session
	// stored before owners were recorded. This package only keeps it.
	Owner string
}

// Info is a live session as listed, with the time it has left.
type Info struct {
	Session
	Remaining time.Duration
}

// EndReason says why a session ended.
type EndReason int

const (
	// Closed: the holder closed it.
	Closed EndReason = iota + 1
	// Expired: its deadline passed without a keep-alive.
	Expired
)

func (r EndReason) String() string {
	switch r {
	case Closed:
		return "closed"
	case Expired:
		return "expired"
	default:
		return "EndReason(" + strconv.Itoa(int(r)) + ")"
	}
}

var (
	// ErrNotFound: no such session. It never existed, or it has ended and
	// been forgotten.
	ErrNotFound = errors.New("session not found")
	// ErrExpired: the session's deadline has passed. It cannot be renewed.
	ErrExpired = errors.New("session expired")
	// ErrInvalidTTL: a requested TTL is outside the allowed range.
	ErrInvalidTTL = errors.New("invalid session ttl")
	// ErrInvalidHolder: a holder name is empty, too long, not UTF-8 or
	// not printable (see CheckHolder).
	ErrInvalidHolder = errors.New("invalid session holder")
	// ErrClosed: the Manager has been closed.
	ErrClosed = errors.New("session manager closed")
	// ErrLimit: opening one more session would pass a limit (see
	// LimitError).
	ErrLimit = errors.New("too many sessions")
)

// LimitError refuses a session that would pass a limit: the sessions
// one owner may hold (Config.MaxPerOwner), or those of every owner
// together (Config.MaxTotal). It wraps ErrLimit.
type LimitError struct {
	Owner string // the owner that asked
	Total bool   // the limit of every owner together, not the owner's own
	Max   int
}

func (e *LimitError) Error() string {
	if e.Total {
		return fmt.Sprintf("%v: the nameserver holds %d sessions, the most it takes (--max-sessions): close some, or raise the limit", ErrLimit, e.Max)
	}
	return fmt.Sprintf("%v: %s holds %d sessions, the most one identity may (--max-sessions-per-identity): close sessions it no longer uses (one per process is enough)", ErrLimit, e.Owner, e.Max)
}

func (e *LimitError) Unwrap() error { return ErrLimit }

// shownLen is how much of an id Short keeps: enough to tell sessions
// apart in a table, far too little to act as one.
const shownLen = 8

// Short is what is shown of the id to those who may not act as the
// session: its first hex digits and an ellipsis. Shortening a short id
// changes nothing.
func (id ID) Short() string {
	if len(id) <= shownLen {
		return string(id)
	}
	return string(id[:shownLen]) + "…"
}

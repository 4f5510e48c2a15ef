package namespace

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// Sessions returns every session record stored (sessions that were open
// when the nameserver last stopped).
func (s *Store) Sessions() ([]*bfspb.SessionRecord, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	lower, upper := sessionBounds()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("namespace: iterate sessions: %w", err)
	}
	var out []*bfspb.SessionRecord
	for valid := it.First(); valid; valid = it.Next() {
		rec := &bfspb.SessionRecord{}
		if err := proto.Unmarshal(it.Value(), rec); err != nil {
			it.Close()
			return nil, fmt.Errorf("namespace: corrupt session record %x: %w", it.Key(), err)
		}
		out = append(out, rec)
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, fmt.Errorf("namespace: iterate sessions: %w", err)
	}
	return out, it.Close()
}

// Session returns the stored record of session id, as of the last command
// applied: ErrSessionExpired if there is none (the session ended, or
// never was). A record is never changed once stored, so what it says of
// a session (its owner) holds for as long as the session lives.
func (s *Store) Session(id string) (*bfspb.SessionRecord, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	key := sessionKey(id)
	v, closer, err := s.reader().Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrSessionExpired
	}
	if err != nil {
		return nil, fmt.Errorf("namespace: read: %w", err)
	}
	defer closer.Close()
	rec := &bfspb.SessionRecord{}
	if err := proto.Unmarshal(v, rec); err != nil {
		return nil, fmt.Errorf("namespace: corrupt session record %x: %w", key, err)
	}
	return rec, nil
}

func applyOpenSession(st *step, c *bfspb.OpenSessionCmd) (*Result, error) {
	if c.Session.GetSessionId() == "" {
		return nil, fmt.Errorf("%w: session without id", ErrInvalid)
	}
	v, err := proto.Marshal(c.Session)
	if err != nil {
		return nil, err
	}
	return &Result{}, st.b.Set(sessionKey(c.Session.SessionId), v, nil)
}

func applyCloseSession(st *step, c *bfspb.CloseSessionCmd) (*Result, error) {
	return &Result{}, st.b.Delete(sessionKey(c.SessionId), nil)
}

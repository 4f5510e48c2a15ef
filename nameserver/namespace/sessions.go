package namespace

import (
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

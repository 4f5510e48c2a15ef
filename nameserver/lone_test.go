package nameserver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/proto/bfspb"
)

// startLone starts a one-voter nameserver on cfg (its peers' port a free
// one) and returns it and its term once the term is in office. It is
// closed when the test ends.
func startLone(t testing.TB, cfg Config) (*Server, *term) {
	t.Helper()
	cfg.RaftListen = "127.0.0.1:0"
	cfg.Insecure = cfg.TLS == nil
	s, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.Eventually(t, func() bool { return s.current() != nil }, 10*time.Second, 5*time.Millisecond, "no term in office")
	return s, s.current()
}

// openSession stores a session with id, as OpenSession would, without
// the session manager: it is not kept alive, and expires at the next
// leadership term.
func openSession(t testing.TB, s *Server, id string) {
	t.Helper()
	_, err := s.propose(&bfspb.Command{Op: &bfspb.Command_OpenSession{OpenSession: &bfspb.OpenSessionCmd{
		Session: &bfspb.SessionRecord{SessionId: id, Holder: "test", TtlMs: 60_000}}}})
	require.NoError(t, err)
}

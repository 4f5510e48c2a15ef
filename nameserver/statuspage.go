package nameserver

import (
	"net/http"

	"github.com/bfs-go/bfs/internal/daemon"
	"github.com/bfs-go/bfs/nameserver/statuspage"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// startStatusPage starts the status page (nameserver/statuspage) over the
// server's own RPC handlers, its lock transitions and its metrics.
func (s *Server) startStatusPage() error {
	var err error
	s.status, err = statuspage.New(statuspage.Config{
		ClusterID: s.ns.ClusterID,
		Locks:     s, Sessions: s, Chunkservers: s, SafeMode: s,
		Leadership:     leadership{s},
		Events:         lockFeed{s.watch},
		Metrics:        s.metrics.registry,
		Public:         s.cfg.StatusPublic,
		SampleInterval: s.cfg.TestingKnobs.StatusSampleInterval,
		Clock:          s.cfg.Clock,
	})
	return err
}

// HTTPHandler serves the nameserver's HTTP port: Prometheus metrics at
// /metrics and the status page everywhere else. Serve serves it at
// cfg.MetricsAddr; a caller with a listener of its own (the sandbox) may
// serve it there.
func (s *Server) HTTPHandler() http.Handler {
	return daemon.HTTPHandler(s.metrics.registry, s.status.Handler())
}

// lockFeed gives the status page the lock transitions as an operator's
// WatchDirLocks of "/" sees them.
type lockFeed struct{ w *watchers }

func (f lockFeed) Subscribe() (<-chan *bfspb.DirLockEvent, <-chan struct{}, func()) {
	sub := f.w.subscribeSink("/")
	return sub.events, sub.lagged, func() { f.w.unsubscribeSink(sub) }
}

// leadership tells the page who leads the group.
type leadership struct{ s *Server }

func (l leadership) Leader() statuspage.Leader {
	st := l.s.node.Status()
	out := statuspage.Leader{Name: st.LeaderName, Term: st.Term, Self: l.s.Leading()}
	if m, ok := l.s.ns.Member(st.LeaderName); ok {
		out.Address = m.ClientAddress
	}
	return out
}

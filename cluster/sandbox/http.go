package sandbox

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/bfs-go/bfs/internal/certs"
)

// web serves one daemon's HTTP port (its HTTPHandler) on a listener the
// sandbox opened, so that a port of 0 is known once it is bound.
type web struct {
	srv  *http.Server
	addr string
	done chan error
}

// serveHTTP serves h on addr ("127.0.0.1:0": a free port): with creds
// HTTPS requiring a client certificate of the cluster, as the daemons
// serve their own HTTP ports (internal/daemon).
func serveHTTP(addr string, h http.Handler, creds *certs.Creds) (*web, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("HTTP listener: %w", err)
	}
	w := &web{srv: &http.Server{Handler: certs.IdentifyHTTP(h), ReadHeaderTimeout: 10 * time.Second}, addr: lis.Addr().String(), done: make(chan error, 1)}
	if creds != nil {
		lis = tls.NewListener(lis, creds.ServerConfig())
	}
	go func() { w.done <- w.srv.Serve(lis) }()
	return w, nil
}

// close stops serving; a nil web is nothing to stop.
func (w *web) close() error {
	if w == nil {
		return nil
	}
	w.srv.Close()
	if err := <-w.done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// httpAddr is where the i-th daemon's HTTP port goes (the nameservers
// first, then the chunkservers): as last bound, else as configured, else
// a free port.
func (s *Sandbox) httpAddr(i int) string {
	if a := s.httpAddrs[i]; a != "" {
		return a
	}
	if i < len(s.cfg.HTTPAddrs) && s.cfg.HTTPAddrs[i] != "" {
		return s.cfg.HTTPAddrs[i]
	}
	return "127.0.0.1:0"
}

// NameServerHTTPAddr is where the first nameserver serves its status
// page and metrics ("" without Config.HTTP).
func (s *Sandbox) NameServerHTTPAddr() string { return s.httpAddrs[0] }

// NameServerHTTPAddrs are where the nameservers serve theirs, by index.
func (s *Sandbox) NameServerHTTPAddrs() []string {
	return append([]string(nil), s.httpAddrs[:s.cfg.NameServers]...)
}

// ChunkserverHTTPAddrs are where the chunkservers serve their metrics,
// by index ("" without Config.HTTP).
func (s *Sandbox) ChunkserverHTTPAddrs() []string {
	return append([]string(nil), s.httpAddrs[s.cfg.NameServers:]...)
}

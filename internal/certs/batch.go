package certs

import (
	"bufio"
	"net"
	"sync"
	"syscall"
)

// TLS on a gRPC connection, as crypto/tls does it, costs a system call per
// record each way: gRPC hands a TLS connection 1 MiB of block data in one
// Write, which crypto/tls writes to the socket as 64 records of 16 KiB,
// one write each, and reads back one record per read. On a put (three
// replicas streamed from one client) that was some 50,000 system calls
// more per 256 MiB than in plaintext. batchConn sits between TLS and the
// socket and gathers them: the records of one Write above TLS go out in
// one write, and reads fill a buffer of several records at once.

// readBuffer is how much batchConn reads from the socket at once: several
// 16 KiB records. maxBatch bounds what it gathers before writing it, and
// so the memory a connection keeps.
const (
	readBuffer = 128 << 10
	maxBatch   = 256 << 10
)

// batchConn is the connection under TLS. Between begin and end, writes are
// gathered in buf and sent together at end; other writes (a TLS alert, a
// KeyUpdate sent by the reading side) go out at once, after whatever is
// gathered, so that the records keep their order: TLS 1.3 changes keys
// between them.
type batchConn struct {
	net.Conn
	r *bufio.Reader
	// mu serializes the writes to the socket, and is held across them:
	// the records' order is the protocol's, as crypto/tls holds its own
	// output lock while it writes.
	mu struct {
		sync.Mutex
		batching int // Writes between begin and end in progress
		buf      []byte
	}
}

func newBatchConn(c net.Conn) *batchConn {
	return &batchConn{Conn: c, r: bufio.NewReaderSize(c, readBuffer)}
}

func (c *batchConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *batchConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.batching > 0 {
		c.mu.buf = append(c.mu.buf, p...)
		if len(c.mu.buf) >= maxBatch {
			if err := c.flushLocked(); err != nil {
				return 0, err
			}
		}
		return len(p), nil
	}
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// begin starts gathering writes; end sends what was gathered.
func (c *batchConn) begin() {
	c.mu.Lock()
	c.mu.batching++
	c.mu.Unlock()
}

func (c *batchConn) end() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.batching--
	return c.flushLocked()
}

func (c *batchConn) flushLocked() error {
	if len(c.mu.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.mu.buf)
	c.mu.buf = c.mu.buf[:0]
	return err
}

// SyscallConn is the socket's, for gRPC's socket options (it reads through
// the TLS connection above, never from the socket itself).
func (c *batchConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, syscall.EINVAL
	}
	return sc.SyscallConn()
}

// batchedTLS is the TLS connection gRPC uses: each Write's records go to
// the socket together.
type batchedTLS struct {
	net.Conn
	raw *batchConn
}

func (c *batchedTLS) Write(p []byte) (int, error) {
	c.raw.begin()
	n, err := c.Conn.Write(p)
	if ferr := c.raw.end(); err == nil && ferr != nil {
		return 0, ferr
	}
	return n, err
}

// SyscallConn is the socket's.
func (c *batchedTLS) SyscallConn() (syscall.RawConn, error) { return c.raw.SyscallConn() }

package certs

import (
	"bytes"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// recordingConn records each write it gets.
type recordingConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

func (c *recordingConn) sizes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for _, w := range c.writes {
		out = append(out, len(w))
	}
	return out
}

func TestBatchConnKeepsOrder(t *testing.T) {
	rec := &recordingConn{}
	c := newBatchConn(rec)
	// Outside a batch, writes go out at once.
	_, err := c.Write([]byte("alert"))
	require.NoError(t, err)
	require.Equal(t, []int{5}, rec.sizes())
	// Inside, they wait for end, and go out together.
	c.begin()
	for _, r := range []string{"rec1", "rec2", "rec3"} {
		_, err := c.Write([]byte(r))
		require.NoError(t, err)
	}
	require.Equal(t, []int{5}, rec.sizes())
	require.NoError(t, c.end())
	require.Equal(t, []int{5, 12}, rec.sizes())
	require.Equal(t, "rec1rec2rec3", string(rec.writes[1]))
	// A write while a batch is open (a KeyUpdate the reading side sends)
	// joins it, after what was gathered before it.
	c.begin()
	_, err = c.Write([]byte("old-key"))
	require.NoError(t, err)
	_, err = c.Write([]byte("update"))
	require.NoError(t, err)
	require.NoError(t, c.end())
	require.Equal(t, "old-keyupdate", string(rec.writes[2]))
	// A batch never grows past maxBatch.
	c.begin()
	for range 3 {
		_, err := c.Write(make([]byte, maxBatch/2))
		require.NoError(t, err)
	}
	require.NoError(t, c.end())
	require.Equal(t, []int{5, 12, 13, maxBatch, maxBatch / 2}, rec.sizes())
}

package blockstore

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteOrdering(t *testing.T) {
	hello, world := []byte("hello"), []byte("world")
	bad := pkt(1, 1, 0, hello)
	bad.CRC32C++
	type step struct {
		p    Packet
		size int64
		err  error
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  string // block 1's bytes afterwards
	}{
		{"in order", []step{
			{pkt(1, 1, 0, hello), 5, nil},
			{pkt(1, 2, 5, world), 10, nil},
		}, "helloworld"},
		{"duplicate acknowledged again", []step{
			{pkt(1, 1, 0, hello), 5, nil},
			{pkt(1, 2, 5, world), 10, nil},
			{pkt(1, 1, 0, hello), 10, nil},
			{pkt(1, 2, 5, world), 10, nil},
			{pkt(1, 3, 10, hello), 15, nil},
		}, "helloworldhello"},
		{"gap refused, then filled", []step{
			{pkt(1, 1, 0, hello), 5, nil},
			{pkt(1, 3, 10, hello), 5, ErrGap},
			{pkt(1, 2, 5, world), 10, nil},
			{pkt(1, 3, 10, hello), 15, nil},
		}, "helloworldhello"},
		{"created block must start at seq 1", []step{
			{pkt(1, 2, 5, world), 0, ErrGap},
		}, ""},
		{"no packet creates a replica", []step{
			{pkt(2, 1, 0, hello), 0, ErrNotFound},
			{pkt(2, 2, 5, world), 0, ErrNotFound},
		}, ""},
		{"wrong offset refused", []step{
			{pkt(1, 1, 0, hello), 5, nil},
			{pkt(1, 2, 4, world), 5, ErrOffset},
			{pkt(1, 2, 6, world), 5, ErrOffset},
			{pkt(1, 2, 5, world), 10, nil},
		}, "helloworld"},
		{"first packet not at offset 0", []step{
			{pkt(1, 1, 3, hello), 0, ErrOffset},
		}, ""},
		{"checksum mismatch refused", []step{
			{bad, 0, ErrChecksum},
			{pkt(1, 1, 0, hello), 5, nil},
		}, "hello"},
		{"malformed", []step{
			{pkt(1, 0, 0, hello), 0, ErrInvalid},
			{pkt(1, -1, 0, hello), 0, ErrInvalid},
			{pkt(1, 1, -5, hello), 0, ErrInvalid},
		}, ""},
		{"last seals", []step{
			{func() Packet { p := pkt(1, 1, 0, hello); p.Last = true; return p }(), 5, nil},
			{pkt(1, 2, 5, world), 5, ErrSealed},
			{pkt(1, 1, 0, hello), 5, nil}, // a retry of the last packet
		}, "hello"},
		{"empty sync packet", []step{
			{pkt(1, 1, 0, hello), 5, nil},
			{func() Packet { p := pkt(1, 2, 5, nil); p.Sync = true; return p }(), 5, nil},
			{pkt(1, 3, 5, world), 10, nil},
		}, "helloworld"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, t.TempDir())
			create(t, s, 1)
			for i, st := range tc.steps {
				size, err := s.Write(st.p)
				if st.err == nil {
					require.NoError(t, err, "step %d", i)
				} else {
					require.ErrorIs(t, err, st.err, "step %d", i)
				}
				require.Equal(t, st.size, size, "step %d", i)
			}
			got, err := s.Read(1, 0, 100)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
			info, err := s.Info(1)
			require.NoError(t, err)
			require.EqualValues(t, len(tc.want), info.Size)
			_, err = s.Info(2)
			require.ErrorIs(t, err, ErrNotFound, "block 2 was never created")
			require.Len(t, s.List(), 1)
		})
	}
}

func TestSyncedRetryIsDurable(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	create(t, s, 1)
	_, err := s.Write(pkt(1, 1, 0, []byte("abc")))
	require.NoError(t, err)
	// A retry of packet 1 that asks for a sync makes it durable.
	p := pkt(1, 1, 0, []byte("abc"))
	p.Sync = true
	_, err = s.Write(p)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s = openStore(t, dir)
	got, err := s.Read(1, 0, 10)
	require.NoError(t, err)
	require.Equal(t, "abc", string(got))
}

func TestSeal(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	data := randBytes(100_000, 1)
	writeAll(t, s, 7, data, 30_000, func(p *Packet) { p.Version = 3 })

	size, version, err := s.Seal(7)
	require.NoError(t, err)
	require.EqualValues(t, len(data), size)
	require.EqualValues(t, 3, version)
	size, version, err = s.Seal(7) // idempotent
	require.NoError(t, err)
	require.EqualValues(t, len(data), size)
	require.EqualValues(t, 3, version)

	size, err = s.Write(pkt(7, 5, int64(len(data)), []byte("late")))
	require.ErrorIs(t, err, ErrSealed)
	require.EqualValues(t, len(data), size)
	require.Equal(t, []BlockInfo{{ID: 7, Size: int64(len(data)), Version: 3, Sealed: true}}, s.List())

	// Sealing a block never seen records it sealed and empty.
	size, _, err = s.Seal(8)
	require.NoError(t, err)
	require.Zero(t, size)
	_, err = s.Write(pkt(8, 1, 0, []byte("first")))
	require.ErrorIs(t, err, ErrSealed)

	// Both survive a restart, still refusing packets.
	require.NoError(t, s.Close())
	s = openStore(t, dir)
	require.Equal(t, []BlockInfo{
		{ID: 7, Size: int64(len(data)), Version: 3, Sealed: true},
		{ID: 8, Sealed: true},
	}, s.List())
	_, err = s.Write(pkt(8, 1, 0, []byte("first")))
	require.ErrorIs(t, err, ErrSealed)
	_, err = s.Write(pkt(7, 5, int64(len(data)), []byte("late")))
	require.ErrorIs(t, err, ErrSealed)
	got, err := s.Read(7, 0, int64(len(data)))
	require.NoError(t, err)
	require.Equal(t, data, got)
}

// TestSealRacesWrites runs a writer and a sealer per block on several
// blocks at once. Once Seal has returned, no packet may be accepted, and
// the sealed size is exactly the bytes of the packets accepted.
func TestSealRacesWrites(t *testing.T) {
	s := openStore(t, t.TempDir())
	const blocks, packet = 8, 4096
	data := randBytes(packet, 2)
	crc := Checksum(data)
	type result struct {
		accepted, sealedAt int64
		sealed             atomic.Bool
	}
	results := make([]result, blocks)
	var wg sync.WaitGroup
	for id := range BlockID(blocks) {
		create(t, s, id)
		r := &results[id]
		started := make(chan struct{})
		var startOnce sync.Once
		wg.Go(func() { // writer: packets until the first refusal
			defer startOnce.Do(func() { close(started) })
			for seq := int64(1); ; seq++ {
				if seq == 20 {
					startOnce.Do(func() { close(started) })
				}
				after := r.sealed.Load()
				p := Packet{BlockID: id, Seq: seq, Offset: (seq - 1) * packet, Data: data, CRC32C: crc, Sync: seq%7 == 0}
				size, err := s.Write(p)
				if err != nil {
					if !errors.Is(err, ErrSealed) {
						t.Errorf("block %d packet %d: %v", id, seq, err)
					}
					return
				}
				if after {
					t.Errorf("block %d: packet %d accepted after Seal returned", id, seq)
				}
				r.accepted = size
			}
		})
		wg.Go(func() { // sealer
			<-started
			size, _, err := s.Seal(id)
			r.sealed.Store(true)
			if err != nil {
				t.Errorf("seal %d: %v", id, err)
			}
			r.sealedAt = size
		})
	}
	wg.Wait()
	for id := range results {
		r := &results[id]
		info, err := s.Info(BlockID(id))
		require.NoError(t, err)
		require.Equal(t, r.sealedAt, r.accepted, "block %d", id)
		require.Equal(t, BlockInfo{ID: BlockID(id), Size: r.sealedAt, Sealed: true}, info)
		got, err := s.Read(BlockID(id), 0, r.sealedAt+1)
		require.NoError(t, err)
		require.Len(t, got, int(r.sealedAt))
	}
}

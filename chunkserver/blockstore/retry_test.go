package blockstore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRetryMustMatch: a packet with the sequence number of one already
// applied is acknowledged again only if its bytes are what the replica
// holds at its offset. Anything else (a second writer, a confused retry)
// is refused and changes nothing: acknowledging it would tell its sender
// that bytes are stored which are not.
func TestRetryMustMatch(t *testing.T) {
	s := openStore(t, t.TempDir())
	data := randBytes(3*ChunkSize+100, 11)
	// Packets straddle chunk boundaries, so a retry's range is checked
	// across chunks.
	seq := writeAll(t, s, 1, data, 50_000, syncLast)
	require.EqualValues(t, 4, seq)

	other := randBytes(50_000, 12)
	for _, tc := range []struct {
		name string
		p    Packet
	}{
		{"other bytes", pkt(1, 2, 50_000, other)},
		{"one byte differs", func() Packet {
			b := append([]byte(nil), data[50_000:100_000]...)
			b[len(b)/2] ^= 1
			return pkt(1, 2, 50_000, b)
		}()},
		{"other offset", pkt(1, 2, 40_000, other[:10_000])},
		{"shorter", pkt(1, 2, 50_000, other[:100])},
		{"past the end", pkt(1, 4, 150_000, append(append([]byte(nil), data[150_000:]...), 'x'))},
		{"past the end, sync", func() Packet {
			p := pkt(1, 3, int64(len(data)), []byte("more"))
			p.Sync = true
			return p
		}()},
		{"last on an unsealed replica", func() Packet {
			p := pkt(1, 4, 150_000, data[150_000:])
			p.Last = true
			return p
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size, err := s.Write(tc.p)
			require.ErrorIs(t, err, ErrMismatch)
			require.EqualValues(t, len(data), size)
			got, err := s.Read(1, 0, int64(len(data))+10)
			require.NoError(t, err)
			require.Equal(t, data, got)
			info, err := s.Info(1)
			require.NoError(t, err)
			require.False(t, info.Sealed)
		})
	}

	// True retries are acknowledged: the same packet, or one that covers
	// stored bytes exactly.
	for _, p := range []Packet{
		pkt(1, 1, 0, data[:50_000]),
		pkt(1, 2, 50_000, data[50_000:100_000]),
		pkt(1, 4, 150_000, data[150_000:]),
		pkt(1, 2, 60_000, data[60_000:70_000]),
		pkt(1, 3, int64(len(data)), nil),
	} {
		size, err := s.Write(p)
		require.NoError(t, err, "packet %d at %d", p.Seq, p.Offset)
		require.EqualValues(t, len(data), size)
	}

	// A sealed replica refuses what it does not hold as sealed.
	_, _, err := s.Seal(1)
	require.NoError(t, err)
	_, err = s.Write(pkt(1, 2, 50_000, other))
	require.ErrorIs(t, err, ErrSealed)
	last := pkt(1, 4, 150_000, data[150_000:])
	last.Last = true
	_, err = s.Write(last)
	require.NoError(t, err, "the replica is sealed where this last packet ends")
}

// TestRefusalNamesSequenceOnlyToWriter: the writer of the packet applied
// last is told why its packet was refused, with the replica's sequence
// numbers; anyone else gets the same reason (errors.Is) with a text that
// is the same for a gap, a wrong offset and a mismatch.
func TestRefusalNamesSequenceOnlyToWriter(t *testing.T) {
	s := openStore(t, t.TempDir())
	create(t, s, 1)
	for seq := int64(1); seq <= 3; seq++ {
		p := pkt(1, seq, (seq-1)*5, []byte("hello"))
		p.Writer = 7
		_, err := s.Write(p)
		require.NoError(t, err)
	}
	cases := []struct {
		p      Packet
		want   error
		detail string // what the writer is told
	}{
		{pkt(1, 6, 15, []byte("gap")), ErrGap, "expected 4"},
		{pkt(1, 4, 14, []byte("offset")), ErrOffset, "holds 15 bytes"},
		{pkt(1, 2, 5, []byte("world")), ErrMismatch, "from packet 3"},
	}
	var texts []string
	for _, tc := range cases {
		for _, w := range []WriterID{0, 8} {
			p := tc.p
			p.Writer = w
			_, err := s.Write(p)
			require.ErrorIs(t, err, tc.want)
			texts = append(texts, err.Error())
		}
		p := tc.p
		p.Writer = 7
		_, err := s.Write(p)
		require.ErrorIs(t, err, tc.want)
		require.Contains(t, err.Error(), tc.detail)
	}
	for _, text := range texts {
		require.Equal(t, texts[0], text)
		require.NotContains(t, text, "3")
		require.NotContains(t, text, "4")
	}
}

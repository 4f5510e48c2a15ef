package chunkserver

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// viaProto decodes b with the protobuf library, as the oracle of
// decodePacket.
func viaProto(b []byte) (blockstore.Packet, error) {
	var m bfspb.WritePacket
	if err := proto.Unmarshal(b, &m); err != nil {
		return blockstore.Packet{}, err
	}
	return blockstore.Packet{
		BlockID: blockstore.BlockID(m.BlockId), Offset: m.Offset, Seq: m.Seq, Data: m.Data,
		CRC32C: m.Crc32C, Sync: m.Sync, Last: m.Last, Version: m.Version,
	}, nil
}

func marshal(t testing.TB, m *bfspb.WritePacket) []byte {
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}

func TestDecodePacket(t *testing.T) {
	full := marshal(t, &bfspb.WritePacket{BlockId: 7, Offset: 1 << 40, Seq: 3, Data: []byte("hello"), Crc32C: 0xdeadbeef, Sync: true, Last: true, Version: 9})
	for name, b := range map[string][]byte{
		"every field":     full,
		"empty":           nil,
		"negative offset": marshal(t, &bfspb.WritePacket{Offset: -5, Seq: -1}),
		"data only":       marshal(t, &bfspb.WritePacket{Data: make([]byte, 300_000)}),
		"repeated, last wins": append(append([]byte(nil), full...),
			marshal(t, &bfspb.WritePacket{BlockId: 8, Data: []byte("later")})...),
		"data first": append(protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), []byte("x")),
			marshal(t, &bfspb.WritePacket{Seq: 2})...),
		"unknown fields": protowire.AppendFixed32(protowire.AppendTag(
			protowire.AppendVarint(protowire.AppendTag(full, 20, protowire.VarintType), 1), 21, protowire.Fixed32Type), 5),
		"known field, other wire type": protowire.AppendFixed64(protowire.AppendTag(full, 3, protowire.Fixed64Type), 99),
	} {
		t.Run(name, func(t *testing.T) {
			want, err := viaProto(b)
			require.NoError(t, err)
			got, err := decodePacket(b)
			require.NoError(t, err)
			if len(want.Data) == 0 {
				want.Data, got.Data = nil, nil // absent and empty are one
			}
			require.Equal(t, want, got)
		})
	}
	for name, b := range map[string][]byte{
		"truncated data": full[:13],
		"bad varint":     {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"field zero":     {0x00, 0x01},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodePacket(b)
			require.Error(t, err)
		})
	}
}

// TestCodecUnmarshal decodes a packet split over several buffers, as
// gRPC hands over a message that came in several frames, and checks that
// its data is a copy in a pooled buffer that release returns.
func TestCodecUnmarshal(t *testing.T) {
	pool := &bufPool{}
	c := newPacketCodec(pool, nil)
	data := make([]byte, 100_000)
	for i := range data {
		data[i] = byte(i)
	}
	b := marshal(t, &bfspb.WritePacket{BlockId: 1, Seq: 1, Data: data})
	slice := mem.BufferSlice{mem.SliceBuffer(b[:10]), mem.SliceBuffer(b[10:50_000]), mem.SliceBuffer(b[50_000:])}
	var in inPacket
	require.NoError(t, c.Unmarshal(slice, &in))
	require.Equal(t, data, in.p.Data)
	clear(b)
	require.Equal(t, data, in.p.Data, "a copy, not the transport's buffers")
	c.release(&in)
	require.Nil(t, in.buf)

	// Other messages go through the proto codec.
	var ack bfspb.WriteAck
	out, err := c.Marshal(&bfspb.WriteAck{Seq: 4})
	require.NoError(t, err)
	require.NoError(t, c.Unmarshal(out, &ack))
	require.EqualValues(t, 4, ack.Seq)
	require.Error(t, c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0x08})}, &in))
	require.Nil(t, in.buf, "released on error")
}

func TestBufPool(t *testing.T) {
	var p bufPool
	for _, tc := range []struct{ n, cap int }{{0, 256}, {1, 256}, {256, 256}, {257, 512}, {256 << 10, 256 << 10}, {256<<10 + 20, 512 << 10}, {32 << 20, 32 << 20}} {
		b := p.Get(tc.n)
		require.Len(t, *b, tc.n)
		require.Equal(t, tc.cap, cap(*b), "Get(%d)", tc.n)
		p.Put(b)
	}
	odd := make([]byte, 1000)
	p.Put(&odd) // not a class size: dropped
	require.Equal(t, 1024, cap(*p.Get(1000)))
}

// FuzzDecodePacket: decodePacket accepts what proto.Unmarshal accepts,
// with the same result, and refuses what it refuses.
func FuzzDecodePacket(f *testing.F) {
	f.Add(marshal(f, &bfspb.WritePacket{BlockId: 7, Offset: 3, Seq: 3, Data: []byte("hello"), Crc32C: 1, Sync: true, Version: 2}))
	f.Add([]byte{0x22, 0x05, 'a'})
	f.Fuzz(func(t *testing.T, b []byte) {
		want, werr := viaProto(b)
		got, err := decodePacket(b)
		require.Equal(t, werr == nil, err == nil, "proto: %v, decodePacket: %v", werr, err)
		if err == nil {
			if len(want.Data) == 0 {
				want.Data, got.Data = nil, nil
			}
			require.Equal(t, want, got)
		}
	})
}

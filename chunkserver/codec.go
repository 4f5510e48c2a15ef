package chunkserver

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/bfs-go/bfs/chunkserver/blockstore"
)

// packetCodec is the server's gRPC codec: the proto codec, except that a
// write packet received into an *inPacket is decoded by hand, straight
// into the store's Packet. The received bytes are copied once, into a
// pooled buffer that Data points into; the proto codec would copy them
// into a cleared pool buffer, then again into a new Data slice.
type packetCodec struct {
	proto encoding.CodecV2
	pool  *bufPool
	// seen is TestingKnobs.WritePacket.
	seen func(wire []byte)
}

func newPacketCodec(pool *bufPool, seen func([]byte)) packetCodec {
	return packetCodec{proto: encoding.GetCodecV2(proto.Name), pool: pool, seen: seen}
}

// inPacket is a WritePacket as the Write handler receives it.
type inPacket struct {
	p blockstore.Packet
	// buf holds the message, which p.Data points into.
	buf *[]byte
}

// Name is that of the proto codec: the wire format is the same.
func (c packetCodec) Name() string { return proto.Name }

func (c packetCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c packetCodec) Unmarshal(data mem.BufferSlice, v any) error {
	in, ok := v.(*inPacket)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	in.buf = c.pool.Get(data.Len())
	data.CopyTo(*in.buf)
	if c.seen != nil {
		c.seen(*in.buf)
	}
	p, err := decodePacket(*in.buf)
	if err != nil {
		c.release(in)
		return err
	}
	in.p = p
	return nil
}

// release returns the buffer of a packet applied (or refused).
func (c packetCodec) release(in *inPacket) {
	if in.buf != nil {
		c.pool.Put(in.buf)
		in.buf, in.p = nil, blockstore.Packet{}
	}
}

// decodePacket decodes the wire format of a bfspb.WritePacket, as
// proto.Unmarshal would: fields in any order, the last of a repeated
// scalar wins, unknown fields (and known ones of another wire type)
// skipped. Data aliases b.
func decodePacket(b []byte) (blockstore.Packet, error) {
	var p blockstore.Packet
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return p, fmt.Errorf("write packet: %w", protowire.ParseError(n))
		}
		if !num.IsValid() {
			return p, fmt.Errorf("write packet: field number %d", num)
		}
		b = b[n:]
		switch {
		case num == 4 && typ == protowire.BytesType:
			p.Data, n = protowire.ConsumeBytes(b)
		case num >= 1 && num <= 8 && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			setPacketField(&p, num, v)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return p, fmt.Errorf("write packet field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return p, nil
}

// setPacketField sets the varint field num of a WritePacket (see
// proto/chunkserver.proto).
func setPacketField(p *blockstore.Packet, num protowire.Number, v uint64) {
	switch num {
	case 1:
		p.BlockID = blockstore.BlockID(v)
	case 2:
		p.Offset = int64(v)
	case 3:
		p.Seq = int64(v)
	case 5:
		p.CRC32C = uint32(v)
	case 6:
		p.Sync = protowire.DecodeBool(v)
	case 7:
		p.Last = protowire.DecodeBool(v)
	case 8:
		p.Version = v
	}
}

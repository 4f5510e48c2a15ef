package blocktoken

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// TestCheck: a genuine token allows what it names until its deadline on
// the nameserver's clock (learned from the keys' answer, then advanced by
// the chunkserver's own clock, whatever its wall clock says); anything
// else is refused with the error that says why.
func TestCheck(t *testing.T) {
	nsNow := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	// The chunkserver's wall clock is a year off: it does not matter.
	fc := clock.NewFake(nsNow.AddDate(-1, 0, 0))
	ring := NewKeyring(fc)
	key1, err := NewKey(1, nsNow)
	require.NoError(t, err)
	key2, err := NewKey(2, nsNow)
	require.NoError(t, err)
	stranger, err := NewKey(1, nsNow) // same id, another secret
	require.NoError(t, err)

	tok := &bfspb.BlockToken{BlockId: 7, Access: bfspb.BlockAccess_BLOCK_ACCESS_WRITE, Holder: "client/bfs",
		ExpiresUnixMs: nsNow.Add(time.Minute).UnixMilli()}
	signed, err := Sign(key1, tok)
	require.NoError(t, err)
	write := Want{Block: 7, Access: bfspb.BlockAccess_BLOCK_ACCESS_WRITE, Holder: "client/bfs"}

	_, err = ring.Check(signed, write)
	require.ErrorIs(t, err, ErrNoKeys)
	ring.Set(&bfspb.BlockKeys{Keys: []*bfspb.BlockKey{key1, key2}, NowUnixMs: nsNow.UnixMilli()})
	require.True(t, ring.Ready())

	got, err := ring.Check(signed, write)
	require.NoError(t, err)
	require.Equal(t, int64(7), got.BlockId)
	_, err = ring.Check(signed, Want{Block: 7, Access: bfspb.BlockAccess_BLOCK_ACCESS_READ, Holder: "client/bfs"})
	require.NoError(t, err, "a write token reads too")
	_, err = ring.Check(signed, Want{Block: 7, Access: bfspb.BlockAccess_BLOCK_ACCESS_WRITE})
	require.NoError(t, err, "no holder to check (insecure)")

	forgedMAC := &bfspb.SignedBlockToken{Token: signed.Token, KeyId: 1, Mac: append([]byte(nil), signed.Mac...)}
	forgedMAC.Mac[0] ^= 1
	bySomeoneElse, err := Sign(stranger, tok)
	require.NoError(t, err)
	unknownKey := &bfspb.SignedBlockToken{Token: signed.Token, KeyId: 9, Mac: signed.Mac}
	readTok, err := Sign(key2, &bfspb.BlockToken{BlockId: 7, Access: bfspb.BlockAccess_BLOCK_ACCESS_READ, Holder: "client/bfs", ExpiresUnixMs: tok.ExpiresUnixMs})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		t    *bfspb.SignedBlockToken
		want Want
		err  error
	}{
		{"none", nil, write, ErrNoToken},
		{"forged MAC", forgedMAC, write, ErrForged},
		{"another secret", bySomeoneElse, write, ErrForged},
		{"unknown key", unknownKey, write, ErrForged},
		{"garbled", &bfspb.SignedBlockToken{Token: []byte{0xff}, KeyId: 1, Mac: mac(key1.Secret, []byte{0xff})}, write, ErrForged},
		{"other block", signed, Want{Block: 8, Access: write.Access, Holder: write.Holder}, ErrNotAllowed},
		{"other holder", signed, Want{Block: 7, Access: write.Access, Holder: "client/mallory"}, ErrNotAllowed},
		{"read token for a write", readTok, write, ErrNotAllowed},
	} {
		_, err := ring.Check(tc.t, tc.want)
		require.ErrorIs(t, err, tc.err, tc.name)
	}

	fc.Advance(time.Minute - time.Millisecond)
	_, err = ring.Check(signed, write)
	require.NoError(t, err, "a millisecond before the deadline")
	fc.Advance(time.Millisecond)
	_, err = ring.Check(signed, write)
	require.ErrorIs(t, err, ErrExpired)

	// A rotation: key 1 is dropped, its tokens are no longer taken.
	key3, err := NewKey(3, nsNow)
	require.NoError(t, err)
	ring.Set(&bfspb.BlockKeys{Keys: []*bfspb.BlockKey{key2, key3}, NowUnixMs: nsNow.UnixMilli()})
	_, err = ring.Check(signed, write)
	require.ErrorIs(t, err, ErrForged)
}

// TestMetadata: a token attached to an outgoing call is the one read from
// the incoming call; a call without one has ErrNoToken.
func TestMetadata(t *testing.T) {
	key, err := NewKey(1, time.Now())
	require.NoError(t, err)
	signed, err := Sign(key, &bfspb.BlockToken{BlockId: 3})
	require.NoError(t, err)
	ctx, err := Attach(context.Background(), signed)
	require.NoError(t, err)
	md, _ := metadata.FromOutgoingContext(ctx)
	got, err := FromIncoming(metadata.NewIncomingContext(context.Background(), md))
	require.NoError(t, err)
	require.Equal(t, signed.Mac, got.Mac)
	require.Equal(t, signed.Token, got.Token)
	_, err = FromIncoming(context.Background())
	require.ErrorIs(t, err, ErrNoToken)
}

// TestAwait: a token's key that has not arrived yet is waited for until a
// Set brings it, or the context ends.
func TestAwait(t *testing.T) {
	ring := NewKeyring(clock.Real{})
	key, err := NewKey(4, time.Now())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.False(t, ring.Await(ctx, 4))
	got := make(chan bool)
	go func() { got <- ring.Await(context.Background(), 4) }()
	ring.Set(&bfspb.BlockKeys{Keys: []*bfspb.BlockKey{key}})
	require.True(t, <-got)
	require.True(t, ring.Await(context.Background(), 4))
}

package blocktoken

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/bfs-go/bfs/internal/clock"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// MetadataKey is the gRPC metadata key a token travels under (binary:
// gRPC base64-encodes it on the wire).
const MetadataKey = "bfs-block-token-bin"

// secretLen is the length of a key's secret: SHA-256's block of 32 bytes.
const secretLen = 32

// Errors of Check. All but ErrNoKeys refuse the call for good; ErrExpired
// asks the caller for a new token.
var (
	// ErrNoToken: the call carries no token.
	ErrNoToken = errors.New("no block token")
	// ErrForged: the token does not decode, names a key the chunkserver
	// does not hold, or its MAC does not match.
	ErrForged = errors.New("block token not signed by the nameserver")
	// ErrExpired: the token's deadline has passed.
	ErrExpired = errors.New("block token expired")
	// ErrNotAllowed: a genuine token for another block, access or peer.
	ErrNotAllowed = errors.New("block token does not allow it")
	// ErrNoKeys: the chunkserver has no key yet (it has not registered).
	ErrNoKeys = errors.New("no block keys from the nameserver yet")
)

// NewKey makes a key with id and a random secret.
func NewKey(id uint64, now time.Time) (*bfspb.BlockKey, error) {
	secret := make([]byte, secretLen)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("blocktoken: new key: %w", err)
	}
	return &bfspb.BlockKey{Id: id, Secret: secret, CreatedUnixNs: now.UnixNano()}, nil
}

// Sign serializes t and signs it with k.
func Sign(k *bfspb.BlockKey, t *bfspb.BlockToken) (*bfspb.SignedBlockToken, error) {
	b, err := proto.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("blocktoken: %w", err)
	}
	return &bfspb.SignedBlockToken{Token: b, KeyId: k.Id, Mac: mac(k.Secret, b)}, nil
}

func mac(secret, b []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write(b)
	return h.Sum(nil)
}

// Attach returns ctx carrying t in its outgoing metadata; a nil t adds
// nothing.
func Attach(ctx context.Context, t *bfspb.SignedBlockToken) (context.Context, error) {
	if t == nil {
		return ctx, nil
	}
	b, err := proto.Marshal(t)
	if err != nil {
		return ctx, fmt.Errorf("blocktoken: %w", err)
	}
	return metadata.AppendToOutgoingContext(ctx, MetadataKey, string(b)), nil
}

// FromIncoming returns the token in the metadata of an incoming call.
func FromIncoming(ctx context.Context) (*bfspb.SignedBlockToken, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(MetadataKey)
	switch len(vals) {
	case 0:
		return nil, ErrNoToken
	case 1:
	default:
		return nil, fmt.Errorf("%w: %d tokens in one call", ErrForged, len(vals))
	}
	t := &bfspb.SignedBlockToken{}
	if err := proto.Unmarshal([]byte(vals[0]), t); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrForged, err)
	}
	return t, nil
}

// Want is what a call needs a token to allow.
type Want struct {
	Block  int64
	Access bfspb.BlockAccess
	// Holder is the caller's identity ("client/NAME"); "" checks none
	// (an insecure cluster).
	Holder string
}

// Keyring holds the keys a chunkserver accepts and the nameserver's clock
// as it last learned it.
type Keyring struct {
	clock clock.Clock
	mu    struct {
		sync.Mutex
		keys map[uint64][]byte
		// nsNow is the nameserver's wall clock (Unix ms) when the keys
		// were learned, at local (the chunkserver's clock, monotonic).
		nsNow int64
		local time.Time
		// changed is closed (and replaced) by every Set.
		changed chan struct{}
	}
}

// NewKeyring returns a Keyring without keys, reading time from c.
func NewKeyring(c clock.Clock) *Keyring { return &Keyring{clock: c} }

// Set replaces the keys with those of an answer of the nameserver and
// learns its clock. An answer without keys (a nameserver of an older
// version) changes nothing, nor does a nil Keyring.
func (k *Keyring) Set(ks *bfspb.BlockKeys) {
	if k == nil || len(ks.GetKeys()) == 0 {
		return
	}
	keys := make(map[uint64][]byte, len(ks.Keys))
	for _, key := range ks.Keys {
		if len(key.Secret) >= 16 {
			keys[key.Id] = key.Secret
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.mu.keys, k.mu.nsNow, k.mu.local = keys, ks.NowUnixMs, k.clock.Now()
	if k.mu.changed != nil {
		close(k.mu.changed)
		k.mu.changed = nil
	}
}

// Await waits until the Keyring holds key id, or ctx ends; it reports
// whether it does. A token may arrive before its key: a chunkserver the
// nameserver counts as registered before the answer with the keys has
// reached it, a key the chunkserver learns at its next heartbeat.
func (k *Keyring) Await(ctx context.Context, id uint64) bool {
	for {
		k.mu.Lock()
		_, ok := k.mu.keys[id]
		if k.mu.changed == nil {
			k.mu.changed = make(chan struct{})
		}
		changed := k.mu.changed
		k.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

// Ready reports whether the Keyring has keys.
func (k *Keyring) Ready() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.mu.keys) > 0
}

// nameServerNow is the nameserver's wall clock as the Keyring reckons it,
// in Unix ms.
func (k *Keyring) nameServerNowLocked() int64 {
	return k.mu.nsNow + k.clock.Now().Sub(k.mu.local).Milliseconds()
}

// Check verifies t and that it allows want; it returns the token.
func (k *Keyring) Check(t *bfspb.SignedBlockToken, want Want) (*bfspb.BlockToken, error) {
	if t == nil {
		return nil, ErrNoToken
	}
	k.mu.Lock()
	secret, ok := k.mu.keys[t.KeyId]
	have := len(k.mu.keys) > 0
	now := k.nameServerNowLocked()
	k.mu.Unlock()
	switch {
	case !have:
		return nil, ErrNoKeys
	case !ok:
		return nil, fmt.Errorf("%w: unknown key %d", ErrForged, t.KeyId)
	case !hmac.Equal(mac(secret, t.Token), t.Mac):
		return nil, fmt.Errorf("%w: MAC mismatch (key %d)", ErrForged, t.KeyId)
	}
	tok := &bfspb.BlockToken{}
	if err := proto.Unmarshal(t.Token, tok); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrForged, err)
	}
	return tok, allows(tok, want, now)
}

// allows checks a genuine token against the call and the nameserver's
// time now (Unix ms).
func allows(t *bfspb.BlockToken, want Want, now int64) error {
	switch {
	case t.BlockId != want.Block:
		return fmt.Errorf("%w: the token is for block %d, not %d", ErrNotAllowed, t.BlockId, want.Block)
	case want.Access == bfspb.BlockAccess_BLOCK_ACCESS_WRITE && t.Access != bfspb.BlockAccess_BLOCK_ACCESS_WRITE,
		t.Access != bfspb.BlockAccess_BLOCK_ACCESS_READ && t.Access != bfspb.BlockAccess_BLOCK_ACCESS_WRITE:
		return fmt.Errorf("%w: a %v token of block %d for a %v", ErrNotAllowed, t.Access, t.BlockId, want.Access)
	case want.Holder != "" && t.Holder != want.Holder:
		return fmt.Errorf("%w: the token of block %d was issued to %q, not %s", ErrNotAllowed, t.BlockId, t.Holder, want.Holder)
	case t.ExpiresUnixMs <= now:
		return fmt.Errorf("%w: the token of block %d expired %v ago", ErrExpired, t.BlockId, time.Duration(now-t.ExpiresUnixMs)*time.Millisecond)
	}
	return nil
}

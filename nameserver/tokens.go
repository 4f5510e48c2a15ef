package nameserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/golang/glog"

	"github.com/bfs-go/bfs/internal/blocktoken"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/proto/bfspb"
)

// Block tokens (see internal/blocktoken): the nameserver's word that a
// client may read or write a block on the chunkservers. The keys are the
// group's, in the namespace (BlockKeyCmd), so a new leader signs with the
// keys the chunkservers hold already.

// blockKeys is a term's copy of the keys stored in the namespace, oldest
// first.
type blockKeys struct {
	mu   sync.Mutex
	keys []*bfspb.BlockKey
}

func (k *blockKeys) get() []*bfspb.BlockKey {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys
}

func (k *blockKeys) set(keys []*bfspb.BlockKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys = keys
}

// tokenLifetime is how long a token for access issued now is good for.
func (s *Server) tokenLifetime(access bfspb.BlockAccess) time.Duration {
	if knob := s.cfg.TestingKnobs.TokenLifetime; knob != nil {
		if d := knob(access); d != 0 {
			return d
		}
	}
	return s.cfg.BlockTokenLifetime
}

// keyPublishDelay is how long a new key waits before it signs: by then
// every live chunkserver has it from a heartbeat answer.
func (s *Server) keyPublishDelay() time.Duration { return 3 * s.cfg.HeartbeatInterval }

// rotateKeys has the group make a new key when the newest is older than
// the rotation interval (or there is none), and reads the keys back. The
// term calls it at its start, before it serves, and on every pass of its
// liveness loop.
func (t *term) rotateKeys() error {
	if len(t.keys.get()) == 0 {
		keys, err := t.ns.BlockKeys()
		if err != nil {
			return err
		}
		t.keys.set(keys)
	}
	keys := t.keys.get()
	now := t.cfg.Clock.Now()
	var id uint64 = 1
	if n := len(keys); n > 0 {
		if now.Sub(time.Unix(0, keys[n-1].CreatedUnixNs)) < t.cfg.BlockKeyRotation {
			return nil
		}
		id = keys[n-1].Id + 1
	}
	key, err := blocktoken.NewKey(id, now)
	if err != nil {
		return err
	}
	if _, err := t.propose(&bfspb.Command{Op: &bfspb.Command_BlockKey{BlockKey: &bfspb.BlockKeyCmd{Key: key}}}); err != nil {
		return fmt.Errorf("new block key: %w", err)
	}
	if keys, err = t.ns.BlockKeys(); err != nil {
		return err
	}
	t.keys.set(keys)
	glog.Infof("term %d: new block-token key %d (%d kept)", t.num, id, len(keys))
	return nil
}

// signingKey is the key tokens are signed with: the newest, once every
// chunkserver has had time to learn it, else the one before.
func (t *term) signingKey() *bfspb.BlockKey {
	keys := t.keys.get()
	n := len(keys)
	switch {
	case n == 0:
		return nil
	case n == 1 || t.cfg.Clock.Now().Sub(time.Unix(0, keys[n-1].CreatedUnixNs)) >= t.keyPublishDelay():
		return keys[n-1]
	}
	return keys[n-2]
}

// keysAnswer is what Register and HeartBeat hand the chunkservers.
func (t *term) keysAnswer() *bfspb.BlockKeys {
	return &bfspb.BlockKeys{Keys: t.keys.get(), NowUnixMs: t.cfg.Clock.Now().UnixMilli()}
}

// holderOf is the identity a token issued to the peer of ctx names: its
// certificate's, "" on an insecure nameserver.
func holderOf(ctx context.Context) string {
	if id, ok := certs.PeerIdentity(ctx); ok {
		return id.String()
	}
	return ""
}

// issue signs a token for block b; nil if the term has no key (it makes
// one before it serves, so only a failed start leaves none).
func (t *term) issue(b *bfspb.BlockMeta, access bfspb.BlockAccess, holder string) *bfspb.SignedBlockToken {
	return t.issueToken(&bfspb.BlockToken{BlockId: b.Id, Version: b.Version, Access: access, Holder: holder})
}

// issueWrite signs a write token for the writer of session, naming the
// deepest of its fences (the directory lock covering the file).
func (t *term) issueWrite(b *bfspb.BlockMeta, holder, session string, fences []*bfspb.Fence) *bfspb.SignedBlockToken {
	tok := &bfspb.BlockToken{BlockId: b.Id, Version: b.Version, Access: bfspb.BlockAccess_BLOCK_ACCESS_WRITE,
		Holder: holder, SessionId: session}
	for _, f := range fences {
		if len(f.Path) >= len(tok.LockPath) {
			tok.LockPath, tok.LockEpoch = f.Path, f.Epoch
		}
	}
	return t.issueToken(tok)
}

func (t *term) issueToken(tok *bfspb.BlockToken) *bfspb.SignedBlockToken {
	key := t.signingKey()
	if key == nil {
		return nil
	}
	tok.ExpiresUnixMs = t.cfg.Clock.Now().Add(t.tokenLifetime(tok.Access)).UnixMilli()
	signed, err := blocktoken.Sign(key, tok)
	if err != nil {
		glog.Errorf("block %d: %v", tok.BlockId, err)
		return nil
	}
	return signed
}

// who names the peer of ctx for the log.
func who(ctx context.Context) string {
	if h := holderOf(ctx); h != "" {
		return h
	}
	return "an unauthenticated peer"
}

package nameserver_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/cluster/testcluster"
	"github.com/bfs-go/bfs/internal/certs"
	"github.com/bfs-go/bfs/nameserver"
	"github.com/bfs-go/bfs/proto/bfspb"
)

func openForWrite(t *testing.T, ns bfspb.NameServerClient, path, session string) {
	t.Helper()
	r, err := ns.Create(context.Background(), &bfspb.CreateRequest{Path: path, SessionId: session, OpenForWrite: true})
	require.NoError(t, err)
	require.Equal(t, bfspb.StatusCode_OK, r.Status, r.Message)
}

func finish(t *testing.T, ns bfspb.NameServerClient, path, session string) *bfspb.FinishFileResponse {
	t.Helper()
	r, err := ns.FinishFile(context.Background(), &bfspb.FinishFileRequest{Path: path, SessionId: session, Wait: true})
	require.NoError(t, err)
	return r
}

// TestFinishIsGatedByLocks: FinishFile, like AddBlock and SyncBlock, is
// refused with LOCKED (and the holder) to a writer outside the holder's
// session and with CLEANING to everybody during a cleaning; the holder's
// own finish goes through. A writer fenced by a forced unlock is told
// LOCKED once the new holder has the directory, although the cleaning
// closed its file already: a fenced writer never hears that its finish
// went through.
func TestFinishIsGatedByLocks(t *testing.T) {
	closing, proceed := make(chan struct{}), make(chan struct{})
	hold := make(chan bool, 1)
	c := testcluster.Start(t, testcluster.WithNameServerConfig(func(cfg *nameserver.Config) {
		cfg.TestingKnobs.BeforeClose = func(uint64) {
			select {
			case <-hold:
				close(closing)
				<-proceed
			default:
			}
		}
	}))
	ns := bfspb.NewNameServerClient(c.DialAs(c.NameServerAddr, certs.AdminUser)) // forces an unlock
	ctx := context.Background()
	mkdirAll(t, ns, "/t")
	a := openSession(t, ns, "tablet-a")
	b := openSession(t, ns, "tablet-b")
	other := openSession(t, ns, "writer-c")

	openForWrite(t, ns, "/t/c", other) // before anyone locks /t
	la := lockAs(t, ns, "/t", a)
	r := finish(t, ns, "/t/c", other)
	require.Equal(t, bfspb.StatusCode_LOCKED, r.Status, r.Message)
	require.Equal(t, "tablet-a", r.Conflict.GetHolder())
	require.Equal(t, la.Epoch, r.Conflict.GetEpoch())

	openForWrite(t, ns, "/t/a", a)
	r = finish(t, ns, "/t/a", a)
	require.Equal(t, bfspb.StatusCode_OK, r.Status, r.Message)
	require.Empty(t, r.Info.GetWriterSession(), "the holder's finish closed its file")

	// A forced unlock cleans /t: both files still open are closed; the
	// first close waits until the finishes below have been answered.
	openForWrite(t, ns, "/t/a2", a)
	hold <- true
	unlocked := make(chan *bfspb.UnlockDirResponse, 1)
	go func() {
		u, err := ns.UnlockDir(ctx, &bfspb.UnlockDirRequest{Path: "/t", Force: true, Epoch: la.Epoch, Wait: true})
		if err != nil {
			u = &bfspb.UnlockDirResponse{Status: bfspb.StatusCode_INTERNAL, Message: err.Error()}
		}
		unlocked <- u
	}()
	<-closing
	for _, w := range []struct{ path, session string }{{"/t/a2", a}, {"/t/c", other}, {"/t/a2", b}} {
		r = finish(t, ns, w.path, w.session)
		require.Equal(t, bfspb.StatusCode_CLEANING, r.Status, "finish %s by %s: %s", w.path, w.session, r.Message)
	}
	close(proceed)
	u := <-unlocked
	require.Equal(t, bfspb.StatusCode_UNLOCKED, u.Status, "%s", u.Message)
	require.Equal(t, bfspb.LockStatus_LOCK_STATUS_UNLOCKED, u.Lock.GetStatus())

	lb := lockAs(t, ns, "/t", b)
	r = finish(t, ns, "/t/a2", a)
	require.Equal(t, bfspb.StatusCode_LOCKED, r.Status, r.Message)
	require.Equal(t, lb.Epoch, r.Conflict.GetEpoch())
	st, err := ns.Stat(ctx, &bfspb.StatRequest{Path: "/t/a2"})
	require.NoError(t, err)
	require.Empty(t, st.Info.GetWriterSession(), "the cleaning closed A's file")
}

package dirlock

import (
	"context"
	"errors"
	"sync"
	"testing"
)

type fakeCloser struct {
	mu     sync.Mutex
	closed map[uint64]bool
	block  chan struct{}
}

func (f *fakeCloser) CloseFile(ctx context.Context, entry uint64) (int64, error) {
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed[entry] = true
	return int64(entry), nil
}

func TestCloseFilesCtx(t *testing.T) {
	fc := &fakeCloser{closed: map[uint64]bool{}}
	n, err := CloseFilesCtx(context.Background(), fc, []uint64{1, 2, 3})
	if err != nil || n != 6 || len(fc.closed) != 3 {
		t.Fatalf("truncated %d, err %v, closed %v", n, err, fc.closed)
	}
	fc = &fakeCloser{closed: map[uint64]bool{}, block: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := CloseFilesCtx(ctx, fc, []uint64{1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
}

package dirlock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
)

type fakeCloser struct {
	mu       sync.Mutex
	closed   map[uint64]bool
	inFlight int
	most     int
	// block, if set, holds every CloseFile until it is closed or ctx ends.
	block chan struct{}
}

func (f *fakeCloser) CloseFile(ctx context.Context, entry uint64) (int64, error) {
	f.mu.Lock()
	f.inFlight++
	f.most = max(f.most, f.inFlight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
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

func (f *fakeCloser) busy() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inFlight
}

func (f *fakeCloser) closedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.closed)
}

func TestCloseFilesCtx(t *testing.T) {
	fc := &fakeCloser{closed: map[uint64]bool{}}
	n, err := CloseFilesCtx(context.Background(), fc, []uint64{1, 2, 3}, 8)
	if err != nil || n != 6 || len(fc.closed) != 3 {
		t.Fatalf("truncated %d, err %v, closed %v", n, err, fc.closed)
	}
	fc = &fakeCloser{closed: map[uint64]bool{}, block: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := CloseFilesCtx(ctx, fc, []uint64{1}, 8); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
}

// TestCloseFilesCtxIsBounded: no more than limit files are being closed at
// once, however many there are, and every one is closed in the end.
func TestCloseFilesCtxIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &fakeCloser{closed: map[uint64]bool{}, block: make(chan struct{})}
		files := make([]uint64, 100)
		for i := range files {
			files[i] = uint64(i + 1)
		}
		done := make(chan error)
		go func() {
			_, err := CloseFilesCtx(context.Background(), fc, files, 7)
			done <- err
		}()
		synctest.Wait()
		if n := fc.busy(); n != 7 {
			t.Errorf("%d files being closed at once, want the limit, 7", n)
		}
		close(fc.block)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if fc.most != 7 || len(fc.closed) != len(files) {
			t.Fatalf("at most %d at once (want 7), %d of %d closed", fc.most, len(fc.closed), len(files))
		}
	})
}

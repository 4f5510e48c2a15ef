package benchcmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/bfs-go/bfs/sdk"
)

// The Go side of the capi benchmark runs in a process of its own, like
// the C side (libbfs/bench/bench.c), so that neither shares a runtime,
// heap and garbage collector with the in-process cluster: bfsbench runs
// itself again with sdkLoopEnv set, and SDKLoop, called first thing by
// main (and by the tests' TestMain), takes over. Its arguments, what it
// does and what it prints are bench.c's exactly.

// sdkLoopEnv, set in the environment, makes the process the Go side of
// the capi benchmark.
const sdkLoopEnv = "BFSBENCH_CAPI_SDK_LOOP"

// SDKLoop runs the Go side of the capi benchmark if the process was
// started as one, and returns its exit code and true; otherwise it
// returns false at once.
func SDKLoop(args []string, stdout, stderr io.Writer) (int, bool) {
	if os.Getenv(sdkLoopEnv) == "" {
		return 0, false
	}
	if err := sdkLoop(context.Background(), args, stdout); err != nil {
		fmt.Fprintf(stderr, "bfsbench sdk loop: %v\n", err)
		return 1, true
	}
	return 0, true
}

func sdkLoop(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) != 4 || (args[0] != "lock" && args[0] != "write") {
		return fmt.Errorf("usage: lock NAMESERVER DIR DURATION_MS | write NAMESERVER PATH BYTES; got %q", args)
	}
	n, err := strconv.ParseInt(args[3], 10, 64)
	if err != nil {
		return err
	}
	client, err := sdk.Dial(ctx, args[1], sdk.WithHolder("bfsbench-go"))
	if err != nil {
		return err
	}
	defer client.Close()
	if args[0] == "lock" {
		return sdkLockCycles(ctx, client, args[2], time.Duration(n)*time.Millisecond, stdout)
	}
	return sdkWrite(ctx, client, args[2], n, stdout)
}

// sdkLockCycles is bench.c's lock_cycles.
func sdkLockCycles(ctx context.Context, client *sdk.Client, dir string, d time.Duration, stdout io.Writer) error {
	if err := client.MkdirAll(ctx, dir, 0); err != nil {
		return err
	}
	cycle := func() error {
		l, err := client.LockDir(ctx, dir)
		if err != nil {
			return err
		}
		return l.Unlock(ctx)
	}
	if err := cycle(); err != nil { // warm-up: the session's lock watch starts
		return err
	}
	lat := make([]time.Duration, 0, 1<<16)
	start := time.Now()
	end, t := start.Add(d), start
	for t.Before(end) {
		if err := cycle(); err != nil {
			return err
		}
		t2 := time.Now()
		lat = append(lat, t2.Sub(t))
		t = t2
	}
	fmt.Fprintf(stdout, "cycles %d elapsed_ns %d\n", len(lat), t.Sub(start).Nanoseconds())
	for _, l := range lat {
		fmt.Fprintln(stdout, l.Nanoseconds())
	}
	return nil
}

// sdkWrite is bench.c's write_file.
func sdkWrite(ctx context.Context, client *sdk.Client, path string, size int64, stdout io.Writer) error {
	// bench.c's bfs_fs_open has opened the session (and the connection)
	// before its clock starts: so here.
	if _, err := client.Session(ctx); err != nil {
		return err
	}
	buf := make([]byte, ioChunk)
	for i := range buf {
		buf[i] = byte(i*7 + 3)
	}
	start := time.Now()
	w, err := client.Create(ctx, path, sdk.Overwrite())
	if err != nil {
		return err
	}
	for off := int64(0); off < size; off += ioChunk {
		if _, err := w.Write(buf[:min(ioChunk, size-off)]); err != nil {
			w.Close()
			return err
		}
	}
	if err := w.CloseContext(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bytes %d elapsed_ns %d\n", size, time.Since(start).Nanoseconds())
	return nil
}

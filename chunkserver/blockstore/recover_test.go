package blockstore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReopen closes a store with replicas in every state, as a crash
// would leave them (Close syncs nothing), and checks what Open recovers.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	sealed := randBytes(200_000, 8)
	writeAll(t, s, 1, sealed, 64_000, sealLast)

	synced := randBytes(150_000, 9)
	seq := writeAll(t, s, 2, synced[:100_000], 30_000, syncLast)
	_, err := s.Write(pkt(2, seq+1, 100_000, synced[100_000:])) // never synced
	require.NoError(t, err)

	writeAll(t, s, 3, randBytes(1000, 10), 100, nil) // created, never synced
	require.NoError(t, s.Close())

	// Debris of an interrupted meta rewrite, a data file that never got a
	// meta nor a record, and a replica whose meta header is damaged.
	require.NoError(t, os.WriteFile(s.base(2)+tmpExt, []byte("half"), 0o644))
	require.NoError(t, os.WriteFile(s.base(5)+dataExt, []byte("never synced"), 0o644))
	s2 := openStore(t, t.TempDir())
	writeAll(t, s2, 4, []byte("x"), 1, sealLast)
	require.NoError(t, s2.Close())
	require.NoError(t, os.MkdirAll(s.blockDir(4), 0o755))
	for _, ext := range []string{dataExt, metaExt} {
		raw, err := os.ReadFile(s2.base(4) + ext)
		require.NoError(t, err)
		if ext == metaExt {
			raw[30] ^= 1
		}
		require.NoError(t, os.WriteFile(s.base(4)+ext, raw, 0o644))
	}

	s = openStore(t, dir)
	require.Equal(t, []BlockInfo{
		{ID: 1, Size: int64(len(sealed)), Sealed: true},
		{ID: 2, Size: 100_000},
		{ID: 3}, // created: durable from the start, empty
	}, s.List())
	blocks, bytes := s.Usage()
	require.EqualValues(t, 3, blocks)
	require.EqualValues(t, len(sealed)+100_000, bytes)
	got, err := s.Read(1, 0, 1e6)
	require.NoError(t, err)
	require.Equal(t, sealed, got)
	got, err = s.Read(2, 0, 1e6)
	require.NoError(t, err)
	require.Equal(t, synced[:100_000], got)
	st, err := os.Stat(s.base(2) + dataExt)
	require.NoError(t, err)
	require.EqualValues(t, 100_000, st.Size(), "unsynced tail cut")
	for _, gone := range []string{s.base(2) + tmpExt, s.base(5) + dataExt, s.base(4) + metaExt} {
		require.NoFileExists(t, gone)
	}
	st, err = os.Stat(s.base(3) + dataExt)
	require.NoError(t, err)
	require.Zero(t, st.Size(), "unsynced bytes cut")
	require.FileExists(t, s.base(4)+metaExt+".corrupt")

	// The unsealed replica takes the packet after its last synced one.
	_, err = s.Write(pkt(2, seq+1, 100_000, synced[100_000:]))
	require.NoError(t, err)
	size, _, err := s.Seal(2)
	require.NoError(t, err)
	require.EqualValues(t, len(synced), size)
	got, err = s.Read(2, 0, 1e6)
	require.NoError(t, err)
	require.Equal(t, synced, got)
}

func TestOpenLocksDirectory(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	_, err := Open(dir)
	require.Error(t, err)
	require.NoError(t, s.Close())
	s = openStore(t, dir)
	require.NoError(t, s.Close())
}

// crashEnv names the directory the helper process writes into.
const crashEnv = "BLOCKSTORE_CRASH_DIR"

// TestCrashHelper is not a test: TestKill9 runs it in a child process that
// writes until it is killed, printing what each sync made durable. Four
// writers share the store, so their syncs and seals share group commits,
// and its meta log is small, so logs fill and are checkpointed all along.
func TestCrashHelper(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("helper process for TestKill9")
	}
	s, err := open(dir, options{logLimit: 8 << 10})
	if err != nil {
		fmt.Println("error", err)
		return
	}
	data := randBytes(ChunkSize, 11)
	const writers = 4
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for id := BlockID(w + 1); ; id += writers {
				if err := crashWrite(s, id, data); err != nil {
					fmt.Println("error", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// crashWrite creates block id, writes it in 40 packets, syncing every
// fifth and sealing with the last, and prints what each made durable.
func crashWrite(s *Store, id BlockID, data []byte) error {
	if err := s.Create(context.Background(), id); err != nil {
		return err
	}
	fmt.Println("durable", id, 0, false)
	var off int64
	for seq := int64(1); seq <= 40; seq++ {
		p := pkt(id, seq, off, data[:1000+int(seq)*997%len(data)])
		p.Sync, p.Last = seq%5 == 0, seq == 40
		size, err := s.Write(p)
		if err != nil {
			return err
		}
		off = size
		if p.Sync || p.Last {
			fmt.Println("durable", id, size, p.Last)
		}
	}
	return nil
}

// TestKill9 kills a writing process with SIGKILL and checks that every
// sync it reported survives, sealed replicas are sealed, and every replica
// reads back with valid checksums.
func TestKill9(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	durable := make(map[BlockID]int64)
	sealed := make(map[BlockID]bool)
	sc := bufio.NewScanner(out)
	for lines := 0; lines < 300 && sc.Scan(); lines++ {
		f := strings.Fields(sc.Text())
		require.Equal(t, "durable", f[0], sc.Text())
		id, _ := strconv.ParseInt(f[1], 10, 64)
		size, _ := strconv.ParseInt(f[2], 10, 64)
		durable[BlockID(id)], sealed[BlockID(id)] = size, f[3] == "true"
	}
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()

	s := openStore(t, dir)
	for id, size := range durable {
		info, err := s.Info(id)
		require.NoError(t, err, "block %d", id)
		if sealed[id] {
			require.Equal(t, BlockInfo{ID: id, Size: size, Sealed: true}, info)
		}
		require.GreaterOrEqual(t, info.Size, size, "block %d", id)
	}
	for _, info := range s.List() {
		got, err := s.Read(info.ID, 0, info.Size)
		require.NoError(t, err, "block %d", info.ID)
		require.Len(t, got, int(info.Size))
	}
	matches, _ := filepath.Glob(filepath.Join(dir, blocksDir, "*", "*", "*"+tmpExt))
	require.Empty(t, matches)
	logs, err := listLogs(filepath.Join(dir, logDir))
	require.NoError(t, err)
	require.Len(t, logs, 1, "recovery retires the logs it replayed")
}

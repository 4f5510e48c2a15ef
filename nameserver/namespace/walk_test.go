package namespace

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/bfs-go/bfs/proto/bfspb"
)

func TestWalkResumes(t *testing.T) {
	s := open(t, t.TempDir())
	for _, d := range []string{"/a/b", "/a/c", "/d"} {
		require.NoError(t, mkdir(s, d, true))
	}
	for _, f := range []string{"/a/b/f1", "/a/b/f2", "/a/c/g", "/a/e", "/d/h", "/z"} {
		require.NoError(t, create(s, f, false))
	}
	walk := func(root, after string, limit int) []string {
		t.Helper()
		var out []string
		require.NoError(t, s.Walk(root, after, func(p string, _ *bfspb.FileInfo) bool {
			out = append(out, p)
			return limit == 0 || len(out) < limit
		}))
		return out
	}
	all := []string{"/", "/a", "/a/b", "/a/b/f1", "/a/b/f2", "/a/c", "/a/c/g", "/a/e", "/d", "/d/h", "/z"}
	require.Equal(t, all, walk("/", "", 0))
	// Resuming after each entry in turn visits exactly the entries after it.
	for i, p := range all {
		require.Equal(t, all[i+1:], append([]string{}, walk("/", p, 0)...), "after %s", p)
	}
	// A stretch at a time covers everything once.
	var got []string
	for after := ""; ; {
		page := walk("/", after, 3)
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		after = page[len(page)-1]
	}
	require.Equal(t, all, got)
	require.Equal(t, []string{"/a", "/a/b", "/a/b/f1", "/a/b/f2", "/a/c", "/a/c/g", "/a/e"}, walk("/a", "", 0))
	require.Equal(t, []string{"/a/e"}, walk("/a/e", "", 0))
	// An entry removed since the last stretch does not stop the walk.
	require.NoError(t, del(s, "/a/b/f2"))
	require.Equal(t, []string{"/a/c", "/a/c/g", "/a/e", "/d", "/d/h", "/z"}, walk("/", "/a/b/f2", 0))

	require.ErrorIs(t, s.Walk("/a", "/d/h", func(string, *bfspb.FileInfo) bool { return true }), ErrInvalid)
	require.ErrorIs(t, s.Walk("/nope", "", func(string, *bfspb.FileInfo) bool { return true }), ErrNotFound)
	require.ErrorIs(t, s.Walk("rel", "", func(string, *bfspb.FileInfo) bool { return true }), ErrInvalid)
}

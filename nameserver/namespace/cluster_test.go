package namespace

import (
	"testing"
)

func TestClusterIDKeptAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	id := s.ClusterID()
	if len(id) != 32 {
		t.Fatalf("cluster id %q: want 32 hex digits", id)
	}
	s.Close()
	s, err = Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.ClusterID(); got != id {
		t.Fatalf("cluster id after reopen = %q, want %q", got, id)
	}
	other, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if other.ClusterID() == id {
		t.Fatalf("two formatted stores share cluster id %q", id)
	}
}

func TestFateUnknownAboveCounter(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids := s.AllocIDs(3)
	for _, tc := range []struct {
		id   int64
		want BlockFate
	}{
		{int64(ids[0]), BlockGone},
		{int64(ids[2]), BlockGone},
		{int64(ids[2]) + 1, BlockUnknown},
		{1 << 40, BlockUnknown},
		{0, BlockUnknown},
	} {
		got, err := s.Fate(tc.id)
		if err != nil || got != tc.want {
			t.Errorf("Fate(%d) = %v, %v; want %v", tc.id, got, err, tc.want)
		}
	}
}

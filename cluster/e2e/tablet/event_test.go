package tablet

import (
	"bytes"
	"testing"
)

// The tests regenerate a file in one piece that the tablet server wrote
// in appends of any size: Pattern must not depend on how it is cut.
func TestPatternIsPositional(t *testing.T) {
	whole := Pattern("/tera/t1/log", 0, 1000)
	for _, cut := range []int{0, 1, 7, 8, 9, 500, 999, 1000} {
		got := append(Pattern("/tera/t1/log", 0, cut), Pattern("/tera/t1/log", int64(cut), 1000-cut)...)
		if !bytes.Equal(got, whole) {
			t.Fatalf("cut at %d: the pieces differ from the whole", cut)
		}
	}
	if bytes.Equal(Pattern("/tera/t1/lg0/sst-0", 0, 1000), whole) {
		t.Fatal("two files get the same bytes")
	}
	if bytes.Equal(Pattern("/tera/t1/log", 8, 992), whole[:992]) {
		t.Fatal("the bytes do not depend on the offset")
	}
}

package fspath

import (
	"errors"
	"strings"
	"testing"
)

func TestClean(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		bad      bool
	}{
		{in: "/", want: "/"},
		{in: "//", want: "/"},
		{in: "/a", want: "/a"},
		{in: "/a/", want: "/a"},
		{in: "/a//b/./c/", want: "/a/b/c"},
		{in: "/./.", want: "/"},
		{in: "", bad: true},
		{in: "a/b", bad: true},
		{in: "/a/../b", bad: true},
		{in: "/..", bad: true},
		{in: "/a\x00b", bad: true},
		{in: "/" + strings.Repeat("x", MaxLen), bad: true},
		{in: "/" + strings.Repeat("x", MaxNameLen+1), bad: true},
		{in: "/a/...", want: "/a/..."},
	} {
		got, err := Clean(tc.in)
		if tc.bad {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Clean(%q) = %q, %v; want ErrInvalid", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Clean(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestSplitJoinDirBase(t *testing.T) {
	if got := Split("/"); len(got) != 0 {
		t.Errorf("Split(/) = %q", got)
	}
	if got := Join(Split("/a/b/c")); got != "/a/b/c" {
		t.Errorf("Join(Split) = %q", got)
	}
	for p, want := range map[string][2]string{
		"/":     {"/", ""},
		"/a":    {"/", "a"},
		"/a/b":  {"/a", "b"},
		"/a/bc": {"/a", "bc"},
	} {
		if d, b := Dir(p), Base(p); d != want[0] || b != want[1] {
			t.Errorf("Dir/Base(%q) = %q, %q; want %q", p, d, b, want)
		}
	}
}

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		p, base string
		want    bool
	}{
		{"/a", "/", true},
		{"/", "/", true},
		{"/a", "/a", true},
		{"/a/b", "/a", true},
		{"/ab", "/a", false},
		{"/", "/a", false},
		{"/b/a", "/a", false},
	} {
		if got := Within(tc.p, tc.base); got != tc.want {
			t.Errorf("Within(%q, %q) = %v", tc.p, tc.base, got)
		}
	}
}

// FuzzClean checks that Clean never panics, that what it accepts is a fixed
// point, and that accepted paths satisfy the normal-form rules.
func FuzzClean(f *testing.F) {
	for _, s := range []string{"/", "/a/b", "//a//b/", "/a/./b", "/../x", "", "rel", "/a\x00", "/\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := Clean(in)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Clean(%q) error %v does not wrap ErrInvalid", in, err)
			}
			return
		}
		again, err := Clean(out)
		if err != nil || again != out {
			t.Fatalf("Clean not idempotent: %q -> %q -> %q, %v", in, out, again, err)
		}
		if out != Root && strings.HasSuffix(out, "/") {
			t.Fatalf("trailing slash in %q", out)
		}
		if strings.Contains(out, "//") || strings.Contains(out, "/./") || strings.HasSuffix(out, "/.") {
			t.Fatalf("not normalized: %q", out)
		}
		if Join(Split(out)) != out {
			t.Fatalf("Split/Join round trip failed for %q", out)
		}
	})
}

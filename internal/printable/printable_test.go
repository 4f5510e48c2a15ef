package printable

import (
	"errors"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"/tera/t1", "/tera/t1"},
		{"ip:port:1700000000", "ip:port:1700000000"},
		{"tablet server é ✓ 表", "tablet server é ✓ 表"},
		{"evil\x1b[2K\r/tablet9 unlocked", `evil\x1b[2K\r/tablet9 unlocked`},
		{"a\nb\tc\ad\x7f", `a\nb\tc\ad\x7f`},
		{"right\u202eleft", `right\u202eleft`},
		{"zero\u200bwidth", `zero\u200bwidth`},
		{"not utf-8 \xff\xfe", `not utf-8 \xff\xfe`},
		{`back\slash`, `back\\slash`},
		{`looks like \x1b`, `looks like \\x1b`},
		{"\ufffd is a character", "\ufffd is a character"},
		{"nbsp\u00a0", `nbsp\u00a0`},
	} {
		if got := String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestError(t *testing.T) {
	if got := Error(errors.New("open /a\rb: not found")); got != `open /a\rb: not found` {
		t.Errorf("Error = %q", got)
	}
}

// FuzzString: whatever the input, the output is valid UTF-8 made of
// printable characters only.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "/a", "evil\x1b[2K\r", "\xff", `\`, "\u202e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := String(s)
		if !utf8.ValidString(out) {
			t.Fatalf("String(%q) = %q is not UTF-8", s, out)
		}
		for _, r := range out {
			if !unicode.IsPrint(r) {
				t.Fatalf("String(%q) = %q holds %U", s, out, r)
			}
		}
	})
}

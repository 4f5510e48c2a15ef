package benchcmd

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"256MiB", 256 << 20},
		{"1GiB", 1 << 30},
		{"1gib", 1 << 30},
		{"1.5GiB", 3 << 29},
		{"4096", 4096},
		{"4096B", 4096},
		{"4kB", 4000},
		{"64k", 64 << 10},
		{"2 MiB", 2 << 20},
		{"1TB", 1e12},
		{"0", 0},
	} {
		got, err := parseSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "-1MiB", "-5", "abc", "MiB", "1.5", "12XB", "1e3", "1..5MiB", "99999999TiB", "NaN"} {
		if n, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, n)
		} else if !strings.Contains(err.Error(), "invalid size") {
			t.Errorf("parseSize(%q): error %q does not say what is wrong", in, err)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{256 << 20: "256MiB", 1 << 30: "1GiB", 1536: "1536B", 3 << 29: "1536MiB", 0: "0B"} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}
	// A size flag prints what it parsed.
	var v sizeValue
	if err := v.Set("1.5GiB"); err != nil || v.String() != "1536MiB" {
		t.Errorf("sizeValue.Set(1.5GiB) = %v, %q", err, v.String())
	}
}

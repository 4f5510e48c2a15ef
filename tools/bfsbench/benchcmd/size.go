package benchcmd

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// sizeUnits are the units a size flag accepts, matched without regard to
// case: decimal kB/MB/GB/TB and binary KiB/MiB/GiB/TiB; a bare K, M, G or T
// is binary, as in dd and most storage tools.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// parseSize parses a byte count such as "256MiB", "1GiB", "1.5GiB", "4kB"
// or "4096". Negative, fractional-byte and overflowing sizes are errors.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.' || r == '-' || r == '+') })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("invalid size %q: want a number of bytes with an optional unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB), e.g. 256MiB", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("invalid size %q: %q is not a number", s, num)
	}
	if f < 0 {
		return 0, fmt.Errorf("invalid size %q: negative", s)
	}
	bytes := f * float64(mult)
	if bytes >= math.MaxInt64 {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	if bytes != math.Trunc(bytes) {
		return 0, fmt.Errorf("invalid size %q: not a whole number of bytes", s)
	}
	return int64(bytes), nil
}

// formatSize prints n in the largest binary unit that divides it exactly.
func formatSize(n int64) string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// sizeValue is a pflag.Value holding a size in bytes.
type sizeValue int64

func (v *sizeValue) String() string { return formatSize(int64(*v)) }

func (v *sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*v = sizeValue(n)
	return nil
}

func (*sizeValue) Type() string { return "size" }

// sizeTrials are the flags of a benchmark writing files: the size of
// each and how many trials.
type sizeTrials struct {
	size   sizeValue
	trials int
}

// register adds the flags, each name prefixed with prefix (the benchmark's
// name and a dash under all), with the help texts given.
func (o *sizeTrials) register(f *pflag.FlagSet, prefix, sizeHelp, trialsHelp string) {
	f.Var(&o.size, prefix+"size", sizeHelp)
	f.IntVar(&o.trials, prefix+"trials", o.trials, trialsHelp)
}

func (o *sizeTrials) validate(prefix string) error {
	switch {
	case o.size <= 0:
		return fmt.Errorf("--%ssize must be positive, got %s", prefix, o.size.String())
	case o.trials < 1:
		return fmt.Errorf("--%strials must be at least 1, got %d", prefix, o.trials)
	}
	return nil
}

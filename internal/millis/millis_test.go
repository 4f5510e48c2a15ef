package millis

import (
	"math"
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want time.Duration
		ok   bool
	}{
		{0, 0, true},
		{1500, 1500 * time.Millisecond, true},
		{-20, -20 * time.Millisecond, true},
		{Max, time.Duration(Max) * time.Millisecond, true},
		{-Max, -time.Duration(Max) * time.Millisecond, true},
		{Max + 1, 0, false},
		{-Max - 1, 0, false},
		{18446744075710, 0, false}, // wraps to about 2s when multiplied as is
		{math.MaxInt64, 0, false},
		{math.MinInt64, 0, false},
	} {
		got, ok := Duration(tc.ms)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Duration(%d) = %v, %v; want %v, %v", tc.ms, got, ok, tc.want, tc.ok)
		}
		if ok && got.Milliseconds() != tc.ms {
			t.Errorf("Duration(%d).Milliseconds() = %d", tc.ms, got.Milliseconds())
		}
	}
}

package volume

import (
	"fmt"
	"math/rand/v2"
	"syscall"
)

// choose picks the volume for a new replica: at random among the healthy
// volumes with headroom (free space above the policy's reserve), weighted
// by their headroom. A volume that cannot tell its free space weighs as
// much as the average of the others (as 1 if none can tell).
func (s *Set) choose() (*Volume, error) {
	p := *s.policy.Load()
	var (
		cands   []*Volume
		weights []float64
		unknown []int
		total   float64
		known   int
	)
	for _, v := range s.vols {
		v.mu.Lock()
		ok := v.mu.state == Healthy && !v.mu.full
		v.mu.Unlock()
		if !ok {
			continue
		}
		capacity, free := s.space(v)
		w := 0.0
		if capacity == 0 {
			unknown = append(unknown, len(cands))
		} else if w = float64(free - p.reserve(capacity)); w <= 0 {
			continue
		} else {
			total += w
			known++
		}
		cands, weights = append(cands, v), append(weights, w)
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("volume: no volume in service has room for a new replica: %w", syscall.ENOSPC)
	}
	avg := 1.0
	if known > 0 {
		avg = total / float64(known)
	}
	for _, i := range unknown {
		weights[i] = avg
		total += avg
	}
	return cands[pick(weights, total)], nil
}

// pick returns an index of weights at random, each in proportion to its
// weight (total is their sum, > 0).
func pick(weights []float64, total float64) int {
	x := rand.Float64() * total
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(weights) - 1
}

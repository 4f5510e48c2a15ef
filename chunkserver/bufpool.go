package chunkserver

import (
	"math/bits"
	"sync"
)

// bufPool recycles byte buffers in power-of-two size classes, from
// 2^minClass to 2^maxClass bytes; larger ones are allocated and dropped.
// Unlike gRPC's default pool it does not clear a buffer it hands out:
// every user (gRPC reading frames, the packet codec) overwrites what it
// asked for before reading it, and clearing a 1 MiB class buffer for a
// 256 KiB packet cost more than the copy itself. It implements
// mem.BufferPool.
type bufPool struct {
	classes [maxClass + 1]sync.Pool
}

const (
	minClass = 8  // 256 B
	maxClass = 24 // 16 MiB
)

// Get returns a buffer of length n.
func (p *bufPool) Get(n int) *[]byte {
	k := class(n)
	if k > maxClass {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.classes[k].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<k)
	return &b
}

// Put returns a buffer got from Get (or any buffer whose capacity is a
// class size) to the pool.
func (p *bufPool) Put(b *[]byte) {
	c := cap(*b)
	if k := class(c); k <= maxClass && c == 1<<k {
		p.classes[k].Put(b)
	}
}

// class returns the smallest size class holding n bytes.
func class(n int) int {
	if n <= 1<<minClass {
		return minClass
	}
	return bits.Len(uint(n - 1))
}

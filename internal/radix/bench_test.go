package radix

import (
	"testing"
)

// BenchmarkRadixMatch: a ~107K-token agentic prompt (1,672 blocks of 64)
// against a tree holding 64 such sessions.
func BenchmarkRadixMatch(b *testing.B) {
	r := New(64)
	var chains [][]uint64
	for s := 0; s < 64; s++ {
		c := make([]uint64, 1672)
		for i := range c {
			c[i] = uint64(s)<<32 | uint64(i+1)
		}
		m := r.Lock(c, 64, 0)
		n, _ := r.Insert(m.Node, c, m.Blocks, 64, 0)
		r.Unlock(n, 0)
		chains = append(chains, c)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m := r.Match(chains[i%64], 64)
		if m.Blocks != 1672 {
			b.Fatal(m)
		}
	}
}

// BenchmarkRadixTurn: one agentic turn's cache work: lock the previous
// turn's prefix, insert a ~2K-token append, unlock.
func BenchmarkRadixTurn(b *testing.B) {
	r := New(64)
	chain := make([]uint64, 0, 1<<16)
	for i := 0; i < 1600; i++ {
		chain = append(chain, uint64(i+1))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := 0; k < 32; k++ {
			chain = append(chain, uint64(len(chain)+1))
		}
		if len(chain) > 60000 {
			chain = chain[:1600]
			r.Evict(1 << 40)
		}
		m := r.Lock(chain, 64, float64(i))
		n, _ := r.Insert(m.Node, chain, m.Blocks, 64, float64(i))
		r.Unlock(n, float64(i))
	}
}

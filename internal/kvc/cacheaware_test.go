package kvc

import (
	"fmt"
	"testing"
)

// Requests that share a long prefix: kv-aware (Algorithm 1, K = 0) piles
// every one onto the worker that saw the prefix first; SGLang's
// cache-aware keeps them there only until the load gap passes its
// thresholds (32 pending), then sends the next to the least loaded. A
// prompt that matches no worker by more than half goes to the smallest
// tree.
func TestCacheAwareBalancesAsSGLang(t *testing.T) {
	prompt := func(i int) []uint64 {
		b := make([]uint64, 0, 101)
		for k := range 100 {
			b = append(b, uint64(k+1)) // the shared prefix
		}
		return append(b, uint64(1000+i))
	}
	count := func(p Policy) []int {
		r := NewRouter([]string{"w0", "w1", "w2"}, p, Options{Alpha: 1})
		got := make([]int, 3)
		for i := range 100 {
			w := r.Pick(fmt.Sprint(i), prompt(i)).Worker
			r.Dispatched(w, fmt.Sprint(i), prompt(i)) // none finishes: load only grows
			got[w]++
		}
		return got
	}
	if got := count(PolicyKVAware); got[0] != 100 {
		t.Fatalf("kv-aware spread %v; the comparison expects it to pile onto w0", got)
	}
	got := count(PolicyCacheAware)
	for w, n := range got {
		if n < 20 {
			t.Fatalf("cache-aware put %d of 100 on w%d (%v), want the load spread past the thresholds", n, w, got)
		}
	}
	// Balanced and no good match: the smallest tree.
	r := NewRouter([]string{"w0", "w1"}, PolicyCacheAware, Options{})
	r.Dispatched(0, "a", []uint64{1, 2, 3, 4})
	r.Done(0)
	if d := r.Pick("b", []uint64{9, 9, 9}); d.Worker != 1 {
		t.Fatalf("an unmatched prompt went to w%d, want w1 (the smaller tree)", d.Worker)
	}
	if d := r.Pick("c", []uint64{1, 2, 3, 7}); d.Worker != 0 || d.Overlap != 3 {
		t.Fatalf("a 3/4 match went to %+v, want w0", d)
	}
	if _, err := ParsePolicy("cache-aware"); err != nil {
		t.Fatal(err)
	}
}

// The cache-aware policy at each of its thresholds, both sides, by hand.
// The pool is imbalanced when the most and least loaded differ by more
// than 32 requests and the most exceeds 1.0001× the least (BalanceAbs,
// BalanceRel override them): then the least loaded, the lowest index
// among equals; else the prefix holder if it holds more than half the
// prompt (CacheThreshold overrides it), else the smallest tree.
func TestCacheAwareThresholds(t *testing.T) {
	prompt := []uint64{1, 2, 3, 4}
	for _, c := range []struct {
		name     string
		opts     Options
		held     []int // per worker, the prompt's leading blocks its tree holds
		extra    []int // per worker, blocks of other prompts in its tree
		inflight []int
		want     int
	}{
		{"imbalanced: the least loaded, w0", Options{}, nil, nil, []int{0, 40, 40}, 0},
		{"imbalanced: the lowest index of the least loaded", Options{}, nil, nil, []int{0, 0, 40}, 0},
		{"20 apart: balanced, the holder", Options{}, []int{0, 4}, nil, []int{10, 30}, 1},
		{"32 apart: balanced, the holder", Options{}, []int{0, 4}, nil, []int{0, 32}, 1},
		{"33 apart: imbalanced, the least loaded", Options{}, []int{0, 4}, nil, []int{0, 33}, 0},
		{"33 apart within 1.0001×: balanced", Options{}, []int{0, 4}, nil, []int{400000, 400033}, 1},
		{"BalanceAbs 10: 20 apart is imbalanced", Options{BalanceAbs: 10}, []int{0, 4}, nil, []int{10, 30}, 0},
		{"BalanceRel 2: 80 is not over 2×40", Options{BalanceRel: 2}, []int{0, 4}, nil, []int{40, 80}, 1},
		{"BalanceRel 2: 81 is", Options{BalanceRel: 2}, []int{0, 4}, nil, []int{40, 81}, 0},
		{"half the prompt held: the smallest tree", Options{}, []int{2, 0}, []int{10, 4}, []int{0, 0}, 1},
		{"a quarter held: the smallest tree", Options{}, []int{1, 0}, []int{10, 4}, []int{0, 0}, 1},
		{"three quarters held: the holder", Options{}, []int{3, 0}, []int{10, 4}, []int{0, 0}, 0},
		{"CacheThreshold 0.2: a quarter is enough", Options{CacheThreshold: 0.2}, []int{1, 0}, []int{10, 4}, []int{0, 0}, 0},
	} {
		names := make([]string, len(c.inflight))
		for i := range names {
			names[i] = fmt.Sprint("w", i)
		}
		r := NewRouter(names, PolicyCacheAware, c.opts)
		for w := range names {
			if w < len(c.held) && c.held[w] > 0 {
				r.Dispatched(w, "", prompt[:c.held[w]])
			}
			if w < len(c.extra) && c.extra[w] > 0 {
				b := make([]uint64, c.extra[w])
				for i := range b {
					b[i] = uint64(100*(w+1) + i)
				}
				r.Dispatched(w, "", b)
			}
		}
		copy(r.inflight, c.inflight)
		if got := r.Pick("", prompt).Worker; got != c.want {
			t.Errorf("%s: w%d, want w%d", c.name, got, c.want)
		}
	}
}

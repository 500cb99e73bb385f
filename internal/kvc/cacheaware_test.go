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

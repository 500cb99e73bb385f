package engine

import (
	"slices"
	"testing"
)

// Shortest-first admission: a prefill worker busy with a 16,384-token
// prompt (four steps of 4,096) gets, in this order, prompts of 12,288,
// 4,096 and 1,024 tokens. In arrival order their prefills end in that
// order; shortest first the 1,024-token one ends first and the
// 12,288-token one last. With a bound of 0.5 ms every one of them has
// waited past it when the first prompt is done, and arrival order holds.
func TestShortestFirst(t *testing.T) {
	order := func(shortest bool, maxWait float64) []int {
		w, err := New(Config{Name: "p", Role: RolePrefill, Profile: testProfile(t), BlockSize: 64, PoolTokens: 400000, ChunkTokens: 4096,
			MaxRunning: 64, PrefixCache: true, ShortestFirst: shortest, MaxWaitS: maxWait})
		if err != nil {
			t.Fatal(err)
		}
		first := &Request{ID: 1, Kind: PrefillOnly, Blocks: chain(1, 256), Input: 16384, Output: 1}
		if err := w.Submit(0, first); err != nil {
			t.Fatal(err)
		}
		w.Advance(0) // the owner's first step: the worker plans it
		rs := []*Request{
			{ID: 2, Kind: PrefillOnly, Blocks: chain(2, 192), Input: 12288, Output: 1},
			{ID: 3, Kind: PrefillOnly, Blocks: chain(3, 64), Input: 4096, Output: 1},
			{ID: 4, Kind: PrefillOnly, Blocks: chain(4, 16), Input: 1024, Output: 1},
		}
		for i, r := range rs {
			if err := w.Submit(0.001*float64(i+1), r); err != nil {
				t.Fatal(err)
			}
		}
		drive(w, 0.004)
		checkPool(t, w)
		var ids []int
		for len(ids) < len(rs) {
			next := (*Request)(nil)
			for _, r := range rs {
				if !slices.Contains(ids, int(r.ID)) && (next == nil || r.PrefillEndAt < next.PrefillEndAt) {
					next = r
				}
			}
			ids = append(ids, int(next.ID))
		}
		return ids
	}
	for _, tc := range []struct {
		shortest bool
		maxWait  float64
		want     []int
	}{
		{false, 0, []int{2, 3, 4}},
		{true, 0, []int{4, 3, 2}},
		{true, 0.0005, []int{2, 3, 4}}, // every one has waited past the bound: arrival order
	} {
		if got := order(tc.shortest, tc.maxWait); !slices.Equal(got, tc.want) {
			t.Errorf("shortest %v, max wait %v s: admitted %v, want %v", tc.shortest, tc.maxWait, got, tc.want)
		}
	}
}

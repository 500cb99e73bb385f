package kvc

import (
	"fmt"
	"slices"
	"testing"
)

func chain(ns uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = ns<<32 | uint64(i+1)
	}
	return out
}

func TestRoundRobinAndSticky(t *testing.T) {
	r := NewRouter([]string{"a", "b", "c"}, PolicyDefault, Options{})
	var got []int
	for i := 0; i < 6; i++ {
		d := r.Pick("s", nil)
		r.Dispatched(d.Worker, "s", nil)
		got = append(got, d.Worker)
	}
	if want := []int{0, 1, 2, 0, 1, 2}; !slices.Equal(got, want) {
		t.Fatalf("round robin %v, want %v", got, want)
	}
	s := NewRouter([]string{"a", "b", "c"}, PolicySticky, Options{})
	for _, sess := range []string{"x", "y", "x", "z", "y", "x"} {
		d := s.Pick(sess, nil)
		s.Dispatched(d.Worker, sess, nil)
	}
	if w, _ := s.Pin("x"); w != 0 {
		t.Fatalf("x pinned to %d", w)
	}
	if w, _ := s.Pin("y"); w != 1 {
		t.Fatalf("y pinned to %d", w)
	}
	if w, _ := s.Pin("z"); w != 2 {
		t.Fatalf("z pinned to %d (first turns go round-robin)", w)
	}
}

// TestKVAwareScore walks Algorithm 1's tuple: overlap wins, then the
// sticky bonus, then fewer in flight, then fewer assigned.
func TestKVAwareScore(t *testing.T) {
	r := NewRouter([]string{"a", "b", "c"}, PolicyKVAware, Options{Alpha: 1, IndexBlocks: 1000})
	// Empty router: all tie; lowest index.
	if d := r.Pick("s1", chain(1, 10)); d.Worker != 0 || d.Overlap != 0 {
		t.Fatalf("cold pick %+v", d)
	}
	r.Dispatched(1, "s1", chain(1, 10))
	// s1's next turn extends its chain: b holds 10 blocks of it.
	if d := r.Pick("s1", chain(1, 12)); d.Worker != 1 || d.Overlap != 10 || !d.Sticky {
		t.Fatalf("overlap pick %+v", d)
	}
	// A new session with no overlap: a and c tie on score and stickiness;
	// b has one in flight, so a (fewest in flight, lowest index) wins.
	if d := r.Pick("s2", chain(2, 5)); d.Worker != 0 {
		t.Fatalf("tie-break pick %+v", d)
	}
	r.Done(1)
	// The load-floor bonus steers a new session to the under-assigned worker.
	f := NewRouter([]string{"a", "b"}, PolicyKVAware, Options{Alpha: 1, FloorK: 200, IndexBlocks: 1000})
	shared := chain(9, 100)
	f.Dispatched(0, "s1", shared)
	f.Dispatched(0, "s2", shared)
	if d := f.Pick("s3", shared); d.Worker != 1 {
		t.Fatalf("with K=200 a new session sharing a 100-block prefix should go to the idle worker, got %+v", d)
	}
	g := NewRouter([]string{"a", "b"}, PolicyKVAware, Options{Alpha: 1, IndexBlocks: 1000})
	g.Dispatched(0, "s1", shared)
	g.Dispatched(0, "s2", shared)
	if d := g.Pick("s3", shared); d.Worker != 0 {
		t.Fatalf("with K=0 the shared prefix pins new sessions to worker 0 (the seed's pile-up), got %+v", d)
	}
}

func TestIndexBounded(t *testing.T) {
	for _, shared := range []bool{false, true} {
		x := newBlockIndex(Options{IndexBlocks: 100}, new(uint64))
		for s := uint64(0); s < 10; s++ {
			x.add(chain(s, 40), shared)
			if x.tree.Tokens() > 100 {
				t.Fatalf("shared %v: index holds %d blocks, capacity 100", shared, x.tree.Tokens())
			}
		}
		if got := x.prefix(chain(9, 40)); got != 40 {
			t.Fatalf("shared %v: latest chain prefix %d, want 40", shared, got)
		}
		if got := x.prefix(chain(0, 40)); got != 0 {
			t.Fatalf("shared %v: oldest chain should be evicted, prefix %d", shared, got)
		}
	}
}

// An index that does not share a request's blocks copies them: the caller
// may reuse its buffer at once.
func TestIndexCopiesUnsharedBlocks(t *testing.T) {
	x := newBlockIndex(Options{IndexBlocks: 1000}, new(uint64))
	buf := chain(1, 40)
	x.add(buf, false)
	want := chain(1, 40)
	for i := range buf {
		buf[i] = 0 // the caller reuses its buffer
	}
	if got := x.prefix(want); got != 40 {
		t.Fatalf("after the caller reused its buffer the index matches %d of 40 blocks", got)
	}
}

// Requests without a session do not pin one another: kv-aware spreads
// them by load instead of sticking them all to the first worker.
func TestNoSessionNoPin(t *testing.T) {
	r := NewRouter([]string{"w0", "w1"}, PolicyKVAware, Options{Alpha: 1, NoCache: true})
	a := r.Pick("", nil)
	r.Dispatched(a.Worker, "", nil)
	if b := r.Pick("", nil); b.Worker == a.Worker || b.Sticky {
		t.Fatalf("second sessionless request: %+v after the first on w%d", b, a.Worker)
	}
}

// A remembered overlap holds only while the index is unchanged: a dispatch,
// a forgotten path or a reset index makes the router walk it again.
func TestOverlapMemoFollowsTheIndex(t *testing.T) {
	r := NewRouter([]string{"a", "b"}, PolicyKVAware, Options{IndexBlocks: 1000})
	blocks := chain(1, 40)
	m := &overlaps{}
	if got := r.overlap(m, 0, blocks); got != 0 {
		t.Fatalf("empty index: overlap %d", got)
	}
	h := r.Dispatched(0, "s", blocks)
	if got := r.overlap(m, 0, blocks); got != 40 {
		t.Fatalf("after a dispatch of the prompt the memo says %d, want 40", got)
	}
	if got := r.overlap(m, 1, blocks); got != 0 {
		t.Fatalf("the other worker: overlap %d, want 0", got)
	}
	r.ForgetBlocks(0, h)
	if got := r.overlap(m, 0, blocks); got != 0 {
		t.Fatalf("after the path was forgotten the memo says %d, want 0", got)
	}
	r.Dispatched(0, "s", blocks)
	r.overlap(m, 0, blocks)
	r.Reset(0)
	if got := r.overlap(m, 0, blocks); got != 0 {
		t.Fatalf("after a reset the memo says %d, want 0", got)
	}
	if d := r.pickAmong(m, SessionKey{ID: "t"}, blocks, nil); d.Overlap != 0 {
		t.Fatalf("a pick after the reset believes %d blocks", d.Overlap)
	}
}

// A KVC dispatch's two memos share one array: filling one leaves the other
// as it was, and a decoder router grown at run time moves the decoders'
// memo to an array of its own rather than writing over the prefill
// workers' part.
func TestOverlapMemosShareOneArray(t *testing.T) {
	blocks := chain(1, 10)
	d := NewRouter([]string{"d0", "d1", "d2"}, PolicyKVAware, Options{IndexBlocks: 1000})
	p := NewRouter([]string{"p0"}, PolicyKVAware, Options{IndexBlocks: 1000})
	x := &Dispatcher{d: d, p: p}
	tr := &Dispatch{x: x}
	tr.sizeMemos()
	if len(tr.dOv.vals) != 6 || cap(tr.dOv.vals) != 6 || len(tr.pOv.vals) != 2 {
		t.Fatalf("memos sized %d (cap %d) and %d, want 6 (cap 6) and 2", len(tr.dOv.vals), cap(tr.dOv.vals), len(tr.pOv.vals))
	}
	p.Dispatched(0, "s", blocks[:4])
	for i := range 3 {
		d.Dispatched(i, "s", blocks[:1+i])
	}
	if got := p.overlap(&tr.pOv, 0, blocks); got != 4 {
		t.Fatalf("p0: overlap %d, want 4", got)
	}
	for i := range 3 {
		if got := d.overlap(&tr.dOv, i, blocks); got != 1+i {
			t.Fatalf("d%d: overlap %d, want %d", i, got, 1+i)
		}
	}
	d.Add("d3")
	d.Dispatched(3, "s", blocks)
	if got := d.overlap(&tr.dOv, 3, blocks); got != 10 {
		t.Fatalf("added d3: overlap %d, want 10", got)
	}
	if tr.pOv.vals[0] != p.index[0].ver || tr.pOv.vals[1] != 4 {
		t.Fatalf("growing the decoders' memo wrote over the prefill memo: %v", tr.pOv.vals)
	}
	if got := p.overlap(&tr.pOv, 0, blocks); got != 4 {
		t.Fatalf("p0 after d3 joined: overlap %d, want 4", got)
	}
	// Mechanisms whose routers keep no index keep no memo.
	none := &Dispatch{x: &Dispatcher{d: NewRouter([]string{"a"}, PolicyDefault, Options{}), p: p}}
	none.sizeMemos()
	if none.dOv.vals != nil || none.pOv.vals != nil {
		t.Fatal("a router with no index got a memo")
	}
}

// The trace's lines are fmt.Sprintf's for every kind of argument the
// dispatcher passes; another kind is marked, not silently formatted.
func TestTraceLineIsSprintf(t *testing.T) {
	for _, c := range []struct {
		format string
		args   []any
	}{
		{"Begin %s/%d in=%d out=%d", []any{"sess-1", 3, 512, -1}},
		{"Reply d%d can=%t direct=%t %s", []any{2, true, false, "session-not-resident"}},
		{"Accepted %s p%d d%d %s", []any{ActSeed, -1, 4, "direct"}},
		{"Finished %s", []any{"ok"}},
		{"SessionEvicted d%d %s", []any{300, ""}},
		{"TransferLanded", nil},
	} {
		if got, want := traceLine(c.format, c.args), fmt.Sprintf(c.format, c.args...); got != want {
			t.Errorf("%q: traced %q, Sprintf %q", c.format, got, want)
		}
	}
	if got := traceLine("x %v", []any{1.5}); got != "x "+unsupportedTraceArg {
		t.Errorf("a float argument traced as %q", got)
	}
	var lines []string
	x := &Dispatcher{}
	x.SetTrace(func(l string) { lines = append(lines, l) })
	x.traced("Finished %s", "failed")
	if len(lines) != 1 || lines[0] != "Finished failed" {
		t.Errorf("trace got %q", lines)
	}
}

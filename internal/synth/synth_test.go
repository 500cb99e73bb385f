package synth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// checker verifies the stream invariants every consumer relies on. It keeps
// each session's previous request, which is fine at test sizes.
type checker struct {
	t         testing.TB
	bs        int
	maxIn     int
	prefixIDs map[string][]uint64 // shared-prefix ids by ParentSessionID=="" or not
	last      map[string]*trace.Request
	chats     map[int64]bool
	lastTS    float64
	maxID     uint64
	n         int
	resets    int
}

func newChecker(t testing.TB, bs, maxIn int) *checker {
	return &checker{t: t, bs: bs, maxIn: maxIn, prefixIDs: map[string][]uint64{},
		last: map[string]*trace.Request{}, chats: map[int64]bool{}, lastTS: math.Inf(-1)}
}

func (c *checker) fail(r *trace.Request, format string, args ...any) {
	c.t.Helper()
	c.t.Fatalf("request %d (session %s turn %d chat %d): %s", c.n, r.SessionID, r.Turn, r.ChatID, fmt.Sprintf(format, args...))
}

// check takes one request; sharedBlocks is the whole-block size of the
// prefix that session kind must share with every other session of its kind.
func (c *checker) check(r *trace.Request, sharedBlocks int) {
	c.t.Helper()
	c.n++
	if r.Timestamp < c.lastTS {
		c.fail(r, "timestamp %v before previous %v", r.Timestamp, c.lastTS)
	}
	c.lastTS = r.Timestamp
	if c.chats[r.ChatID] {
		c.fail(r, "duplicate chat_id")
	}
	c.chats[r.ChatID] = true
	if r.SessionID == "" || r.Type == "" {
		c.fail(r, "empty session id or type")
	}
	if r.InputLength <= 0 || r.OutputLength <= 0 || (c.maxIn > 0 && r.InputLength > c.maxIn) {
		c.fail(r, "lengths in=%d out=%d (cap %d)", r.InputLength, r.OutputLength, c.maxIn)
	}
	if len(r.HashIDs) != trace.BlocksFor(r.InputLength, c.bs) {
		c.fail(r, "%d hash ids for %d tokens at block size %d", len(r.HashIDs), r.InputLength, c.bs)
	}
	kind := "main"
	if r.ParentSessionID != "" {
		kind = "sub"
		if _, ok := c.last[r.ParentSessionID]; !ok {
			c.fail(r, "parent session %q not seen before", r.ParentSessionID)
		}
	}
	// The shared prefix is the same ids in every session of a kind.
	if sharedBlocks > 0 {
		if want, ok := c.prefixIDs[kind]; !ok {
			c.prefixIDs[kind] = slices.Clone(r.HashIDs[:sharedBlocks])
		} else if !slices.Equal(want, r.HashIDs[:sharedBlocks]) {
			c.fail(r, "shared prefix ids differ from other sessions'")
		}
	}
	prev := c.last[r.SessionID]
	// reused: how many leading ids must equal the previous turn's.
	reused := sharedBlocks
	if prev == nil {
		if r.Turn != 1 || r.ParentChatID != -1 || r.ThinkTimeS != nil {
			c.fail(r, "first request of a session: turn %d parent %d think %v", r.Turn, r.ParentChatID, r.ThinkTimeS)
		}
	} else {
		if r.Turn != prev.Turn+1 || r.ParentChatID != prev.ChatID {
			c.fail(r, "turn %d parent %d after turn %d chat %d", r.Turn, r.ParentChatID, prev.Turn, prev.ChatID)
		}
		if r.ThinkTimeS == nil || *r.ThinkTimeS < 0 {
			c.fail(r, "turn > 1 needs think_time_s >= 0")
		}
		if r.Timestamp < prev.Timestamp+*r.ThinkTimeS-1e-6 {
			c.fail(r, "timestamp %v earlier than previous %v + think %v", r.Timestamp, prev.Timestamp, *r.ThinkTimeS)
		}
		// Either the context grew — the previous prompt's whole blocks come
		// back unchanged — or it was compacted, keeping only the shared
		// prefix. Compaction may follow a huge append that overflowed the
		// cap, so the input length alone cannot tell the two apart.
		if grown := prev.InputLength / c.bs; r.InputLength >= prev.InputLength+prev.OutputLength &&
			slices.Equal(r.HashIDs[:grown], prev.HashIDs[:grown]) {
			reused = grown
		} else {
			c.resets++
		}
		if !slices.Equal(r.HashIDs[:reused], prev.HashIDs[:reused]) {
			c.fail(r, "first %d ids differ from the previous turn's (prev in %d out %d, now %d)", reused, prev.InputLength, prev.OutputLength, r.InputLength)
		}
	}
	// Everything not reused is new KV: ids never seen anywhere before.
	for i, id := range r.HashIDs[reused:] {
		if id <= c.maxID {
			c.fail(r, "block %d id %d is not fresh (max so far %d)", reused+i, id, c.maxID)
		}
	}
	for _, id := range r.HashIDs {
		c.maxID = max(c.maxID, id)
	}
	cp := *r
	cp.HashIDs = slices.Clone(r.HashIDs)
	c.last[r.SessionID] = &cp
}

// drain consumes s, checking each request; it returns the count.
func drain(t testing.TB, s Stream, each func(*trace.Request)) int {
	t.Helper()
	var r trace.Request
	n := 0
	for {
		err := s.Next(&r)
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		each(&r)
	}
}

func encode(t testing.TB, s Stream) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, s.Header())
	if err != nil {
		t.Fatal(err)
	}
	drain(t, s, func(r *trace.Request) {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func mustAgentic(t testing.TB, c Agentic) *AgenticStream {
	t.Helper()
	g, err := NewAgentic(c)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestSynthAgenticDeterministic(t *testing.T) {
	a := encode(t, mustAgentic(t, DefaultAgentic()))
	b := encode(t, mustAgentic(t, DefaultAgentic()))
	if !bytes.Equal(a, b) {
		t.Fatal("same seed gave different output")
	}
	c := DefaultAgentic()
	c.Seed++
	if bytes.Equal(a, encode(t, mustAgentic(t, c))) {
		t.Fatal("different seeds gave identical output")
	}
	sa, _ := NewSmallAppend(DefaultSmallAppend())
	sb, _ := NewSmallAppend(DefaultSmallAppend())
	if !bytes.Equal(encode(t, sa), encode(t, sb)) {
		t.Fatal("small-append not deterministic")
	}
}

// TestSynthAgenticInvariants runs the checker over several seeds and over
// configurations that stress each code path: tight caps (forced
// compaction), ending at the cap, odd block sizes, no shared prefix,
// frequent sub-agents, stagger, and request/duration limits.
func TestSynthAgenticInvariants(t *testing.T) {
	variants := map[string]func(*Agentic){
		"default":     func(*Agentic) {},
		"tight-cap":   func(c *Agentic) { c.MaxInputTokens = 40000 },
		"cap-end":     func(c *Agentic) { c.MaxInputTokens = 60000; c.CapPolicy = CapEnd },
		"block-16":    func(c *Agentic) { c.BlockSize = 16; c.Sessions = 8 },
		"block-512":   func(c *Agentic) { c.BlockSize = 512 },
		"no-prefix":   func(c *Agentic) { c.SharedPrefixTokens = 0; c.SubagentPrefixTokens = 0 },
		"subagents":   func(c *Agentic) { c.SubagentProb = 0.3 },
		"stagger":     func(c *Agentic) { c.StaggerS = 2 },
		"requests":    func(c *Agentic) { c.Sessions = 0; c.Requests = 777 },
		"duration":    func(c *Agentic) { c.Sessions = 0; c.DurationS = 900; c.ArrivalRate = 0.5 },
		"compact-hot": func(c *Agentic) { c.CompactHazard = []CompactBand{{Below: 0, P: 0.3}} },
		"no-compact":  func(c *Agentic) { c.CompactHazard = nil; c.MaxInputTokens = 1 << 30 },
	}
	for name, mod := range variants {
		for seed := uint64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", name, seed), func(t *testing.T) {
				c := DefaultAgentic()
				c.Seed = seed
				mod(&c)
				g := mustAgentic(t, c)
				ck := newChecker(t, c.BlockSize, c.MaxInputTokens)
				n := drain(t, g, func(r *trace.Request) {
					shared := c.SharedPrefixTokens / c.BlockSize
					if r.ParentSessionID != "" {
						shared = c.SubagentPrefixTokens / c.BlockSize
					}
					ck.check(r, shared)
					if c.DurationS > 0 && r.Timestamp >= c.DurationS {
						t.Fatalf("request at %v past duration %v", r.Timestamp, c.DurationS)
					}
				})
				if c.Requests > 0 && int64(n) != c.Requests {
					t.Fatalf("got %d requests, want %d", n, c.Requests)
				}
				if name == "tight-cap" && ck.resets == 0 {
					t.Fatal("a 40K cap should force compactions")
				}
				if name == "no-compact" && ck.resets != 0 {
					t.Fatalf("%d contexts reset with compaction off", ck.resets)
				}
				if n == 0 {
					t.Fatal("empty stream")
				}
			})
		}
	}
}

func TestSynthSmallAppend(t *testing.T) {
	c := DefaultSmallAppend()
	g, err := NewSmallAppend(c)
	if err != nil {
		t.Fatal(err)
	}
	ck := newChecker(t, c.BlockSize, 0)
	var lastIn int
	n := drain(t, g, func(r *trace.Request) {
		ck.check(r, 0)
		if r.Turn == c.Turns {
			lastIn = r.InputLength
		}
	})
	if n != c.Sessions*c.Turns || lastIn != 32768+9*(512+256) {
		t.Fatalf("got %d requests, last input %d", n, lastIn)
	}
	// Variants: shared prefix, odd sizes, zero stagger (all tie at t=0).
	for _, mod := range []func(*SmallAppend){
		func(c *SmallAppend) { c.SharedPrefixTokens = 4000 },
		func(c *SmallAppend) { c.BlockSize = 24; c.InitialTokens = 1001; c.AppendTokens = 0; c.OutputTokens = 7 },
		func(c *SmallAppend) { c.StaggerS = 0; c.GapS = 0 },
	} {
		c := DefaultSmallAppend()
		mod(&c)
		g, err := NewSmallAppend(c)
		if err != nil {
			t.Fatal(err)
		}
		ck := newChecker(t, c.BlockSize, 0)
		drain(t, g, func(r *trace.Request) {
			ck.check(r, c.SharedPrefixTokens/c.BlockSize)
			var idx int
			fmt.Sscanf(r.SessionID, "s%d", &idx)
			if want := float64(idx)*c.StaggerS + float64(r.Turn-1)*c.GapS; r.Timestamp != want {
				t.Fatalf("%s turn %d at %v, want %v", r.SessionID, r.Turn, r.Timestamp, want)
			}
		})
	}
}

func TestSynthValidate(t *testing.T) {
	for name, mod := range map[string]func(*Agentic){
		"block":     func(c *Agentic) { c.BlockSize = 0 },
		"unbounded": func(c *Agentic) { c.Sessions = 0 },
		"arrival":   func(c *Agentic) { c.ArrivalRate = 0 },
		"cap":       func(c *Agentic) { c.MaxInputTokens = 1000 },
		"policy":    func(c *Agentic) { c.CapPolicy = "drop" },
		"bands":     func(c *Agentic) { c.CompactHazard = []CompactBand{{Below: 0, P: 0.1}, {Below: 5, P: 0.1}} },
	} {
		c := DefaultAgentic()
		mod(&c)
		if _, err := NewAgentic(c); err == nil {
			t.Errorf("%s: invalid config accepted", name)
		}
	}
	s := DefaultSmallAppend()
	s.Turns = 0
	if _, err := NewSmallAppend(s); err == nil {
		t.Error("small-append: zero turns accepted")
	}
}

// TestSynthStreamingMemory generates 200K requests and checks that the live
// heap stays flat: the generator holds only active sessions, so the heap
// after 200K requests must be no larger (within slack) than after 20K.
func TestSynthStreamingMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("generates 200K requests")
	}
	c := DefaultAgentic()
	c.Sessions, c.Requests = 0, 200000
	g := mustAgentic(t, c)
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	base := heap()
	var samples []uint64
	var r trace.Request
	for i := 1; ; i++ {
		if err := g.Next(&r); err != nil {
			break
		}
		if i%20000 == 0 {
			samples = append(samples, heap()-min(base, heap())) // floor at 0
		}
	}
	t.Logf("live heap above baseline every 20K requests (bytes): %v; active sessions at end %d", samples, g.active.len())
	first, peak := samples[0], slices.Max(samples)
	const slack = 8 << 20
	if peak > first+slack || peak > 64<<20 {
		t.Fatalf("heap grows with the stream: first %d, peak %d bytes", first, peak)
	}
}

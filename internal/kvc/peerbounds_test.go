package kvc

import (
	"slices"
	"strings"
	"testing"
)

// The peers' decisions at their bounds, every figure by hand (block size
// 64): llm-d's prefix decider and the decode-radix note. They are what
// mutation testing found no test of.

func peerDispatcher(m Mechanism, pc PeerConfig, caps WorkerCaps) *Dispatcher {
	return NewDispatcher(DispatchConfig{Mechanism: m, Policy: PolicyKVAware, Options: Options{Alpha: 1}, BlockSize: 64,
		DecodeKVBlocks: 1000, Peer: pc, Workers: caps},
		[]string{"p0"}, []string{"d0", "d1"}, Options{Alpha: 1}, Options{Alpha: 1})
}

func hashes(from, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(1000 + from + i)
	}
	return out
}

// llm-d's prefix-based decider: local prefill when nonCachedTokens is 0,
// when the prompt is under promptTokens, or when the suffix d0 does not
// hold is under nonCachedTokens; else PD. Each bound is tried on both
// sides: a prompt of exactly promptTokens is not under it, an uncached
// suffix of exactly nonCachedTokens is not under it.
func TestPrefixDeciderBounds(t *testing.T) {
	noLocal := WorkerCaps{LocalOnD: func(int) bool { return false }}
	for _, c := range []struct {
		name        string
		nonCached   int
		prompt      int // promptTokens
		input, held int // the prompt's tokens, the blocks d0 holds of it
		caps        WorkerCaps
		wantKind    ActionKind
		wantMode    string
	}{
		{"nonCachedTokens 0", 0, 512, 2000, 0, WorkerCaps{}, ActLocal, ModeDeciderLocal},
		{"prompt one under promptTokens", 256, 512, 511, 0, WorkerCaps{}, ActLocal, ModeDeciderLocal},
		{"prompt at promptTokens", 256, 512, 512, 0, WorkerCaps{}, ActPD, ModeDeciderPD},
		{"promptTokens 0: no prompt bound", 256, 0, 300, 0, WorkerCaps{}, ActPD, ModeDeciderPD},
		{"uncached one under nonCachedTokens", 256, 512, 1023, 12, WorkerCaps{}, ActLocal, ModeDeciderLocal},
		{"uncached at nonCachedTokens", 256, 512, 1024, 12, WorkerCaps{}, ActPD, ModeDeciderPD},
		{"short prompt, decoder cannot prefill", 256, 512, 511, 0, noLocal, ActPD, ModeDeciderPD},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := peerDispatcher(MechPrefixDecider, PeerConfig{NonCachedTokens: c.nonCached, PromptTokens: c.prompt}, c.caps)
			blocks := hashes(0, (c.input+63)/64)
			x.d.PinTo(0, "s", blocks[:c.held]) // d0 holds the session and held blocks of its prompt
			d := x.Begin(0, Request{Session: "s", Turn: 2, Blocks: blocks, Input: c.input, Output: 4})
			if a := d.Action(); a.Kind != c.wantKind || a.D != 0 || d.Mode() != c.wantMode {
				t.Errorf("action %+v mode %s, want %v on d0 (%s); path %v", a, d.Mode(), c.wantKind, c.wantMode, d.Path())
			}
		})
	}
}

// A peer picks among the decoders a retry does not avoid, and only when
// it avoids them all picks as if nothing were avoided: here d1 holds the
// session (the router's pin), so avoiding d1 gives d0, avoiding d0 gives
// d1, avoiding both gives the pin's d1.
func TestPeerPickAvoids(t *testing.T) {
	for _, c := range []struct {
		avoid []int
		want  int
	}{{[]int{1}, 0}, {[]int{0}, 1}, {[]int{0, 1}, 1}} {
		x := peerDispatcher(MechPrefixDecider, PeerConfig{NonCachedTokens: 256}, WorkerCaps{})
		x.d.PinTo(1, "s", nil)
		d := x.Begin(0, Request{Session: "s", Turn: 2, Blocks: hashes(0, 10), Input: 640, Output: 4, Avoid: c.avoid})
		if got := d.Action().D; got != c.want {
			t.Errorf("avoiding %v: decoder %d, want %d", c.avoid, got, c.want)
		}
	}
}

// The decode-radix path names what the decoder holds: of a 300-token
// prompt whose first two blocks d0 holds, 128 tokens, P sending the rest.
func TestDecodeRadixNoteCountsHeldTokens(t *testing.T) {
	x := peerDispatcher(MechDecodeRadix, PeerConfig{}, WorkerCaps{})
	blocks := hashes(0, 5)
	x.d.PinTo(0, "s", blocks[:2])
	d := x.Begin(0, Request{Session: "s", Turn: 2, Blocks: blocks, Input: 300, Output: 4})
	if a := d.Action(); a.Kind != ActPD || a.D != 0 {
		t.Fatalf("action %+v, want PD to d0", a)
	}
	if !slices.ContainsFunc(d.Path(), func(s string) bool { return strings.Contains(s, "d0 holds 128 of 300 prompt tokens") }) {
		t.Errorf("path %v does not say d0 holds 128 of 300 prompt tokens", d.Path())
	}
}

package kvctest

// Prompts builds each turn's prompt token ids, as a client appends to its
// conversation: the session's previous prompt, the previous answer
// (answer(i) gives turn i's output ids once it has run), then New fresh
// ids. Sessions draw fresh ids from their own ranges, so no two share a
// prefix.
type Prompts struct {
	last map[string][]int
	next map[string]int
	n    int
}

// NewPrompts starts a script's prompts.
func NewPrompts() *Prompts { return &Prompts{last: map[string][]int{}, next: map[string]int{}} }

// Next is t's prompt, after prev (the session's previous answer's ids,
// nil for its first turn).
func (p *Prompts) Next(t Turn, prev []int) []int {
	base, ok := p.next[t.Session]
	if !ok {
		p.n++
		base = p.n * 10_000_000
	}
	out := append(append(append([]int{}, p.last[t.Session]...), prev...), make([]int, t.New)...)
	for i := len(out) - t.New; i < len(out); i++ {
		out[i] = base
		base++
	}
	p.next[t.Session] = base
	p.last[t.Session] = out
	return out
}

// Blocks chains a prompt's tokens into prefix-block ids, each naming its
// whole prefix (the last block may be partial), as the gateway and the
// emulated worker hash a prompt.
func Blocks(toks []int, bs int) []uint64 {
	var out []uint64
	var prev uint64 = 1469598103934665603
	for i := 0; i < len(toks); i += bs {
		h := prev
		for _, t := range toks[i:min(i+bs, len(toks))] {
			h = (h ^ uint64(t)) * 1099511628211
		}
		prev = h
		out = append(out, h)
	}
	return out
}

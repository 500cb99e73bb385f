package sim

// lastTable is the session-end scan's entry per session: a session id's
// 64-bit hash and the ordinal of its latest request, in an open-addressed
// table (linear probing over a power-of-two array) rather than a Go map.
// The scan files one entry a session and looks up one a request, and on a
// trace of a million one-turn sessions the map's assigns, with its growth,
// were about 2 % of the run (the hash is the scan's already: no second
// hashing a key, no tombstones, nothing deleted). Hash 0 is a key like
// any other, kept beside the array, since an empty slot reads 0.
type lastTable struct {
	keys  []uint64
	vals  []int32 // ordinal + 1; 0 marks an empty slot
	n     int     // entries in keys
	zero  int32   // hash 0's ordinal + 1, 0 when it has none
	shift uint    // 64 − log2(len(keys))
}

// lastMix spreads a hash over the table's index bits (Fibonacci hashing:
// FNV's high bits are the well-mixed ones).
const lastMix = 0x9e3779b97f4a7c15

// put sets h's latest request to i (i ≥ 0).
func (t *lastTable) put(h uint64, i int32) {
	if h == 0 {
		t.zero = i + 1
		return
	}
	if 2*(t.n+1) > len(t.keys) {
		t.grow()
	}
	mask := uint64(len(t.keys) - 1)
	for j := (h * lastMix) >> t.shift; ; j = (j + 1) & mask {
		switch t.keys[j] {
		case h:
			t.vals[j] = i + 1
			return
		case 0:
			t.keys[j], t.vals[j] = h, i+1
			t.n++
			return
		}
	}
}

// grow doubles the array (from 1,024 slots) and files the entries again.
func (t *lastTable) grow() {
	keys, vals := t.keys, t.vals
	size := max(2*len(keys), 1024)
	t.keys, t.vals = make([]uint64, size), make([]int32, size)
	t.shift = 64
	for s := size; s > 1; s >>= 1 {
		t.shift--
	}
	mask := uint64(size - 1)
	for k, h := range keys {
		if h == 0 {
			continue
		}
		j := (h * lastMix) >> t.shift
		for t.keys[j] != 0 {
			j = (j + 1) & mask
		}
		t.keys[j], t.vals[j] = h, vals[k]
	}
}

// each calls f with every entry's latest ordinal, in no set order.
func (t *lastTable) each(f func(i int32)) {
	if t.zero != 0 {
		f(t.zero - 1)
	}
	for _, v := range t.vals {
		if v != 0 {
			f(v - 1)
		}
	}
}

// Package idtable maps int64 ids that mostly come in increasing order (a
// trace's chat ids, numbered 0, 1, 2, … in file order) to values: ids in a
// dense window sit in a slice indexed by id less the window's base, any
// other id (negative, huge, below the oldest entry the window holds, far
// past it) in a map. Where entries are deleted about as they were added
// (the requests in flight of a replay) the window slides: once its first
// half holds nothing, the rest moves down and the base up, so its memory
// follows the ids between the oldest entry held and the newest, and a get,
// put or delete is a slice access, not a map's hashing. A few old ids that
// stay held while the rest go in order are shed to the map so that the
// window can move on (shed), and a window that once grew for a burst gives
// its slice back (shrink). It is the trace checker's chat table
// (trace/check.go), the replay's requests in flight, and, through Keyed
// (keyed.go), the session records the workers and the control plane keep
// by the simulator's session numbers.
package idtable

// Table is the map; the zero value is empty and ready.
type Table[V any] struct {
	// Spread is how sparse the ids in use may be and still sit in the
	// slice: the window reaches Spread times the entries it holds past its
	// oldest (0 or less: 2). A worker's sessions are every k-th number of
	// a pool of k workers, so its tables spread further than a trace's
	// chat ids.
	Spread int

	dense []V      // dense[id-base]: id's value, when its bit in bits is set
	bits  []uint64 // bit i: dense[i] is held (a bit beside the value, not a bool padding a slot)
	base  int64    // the id dense[0] stands for
	lo    int      // dense[:lo] holds nothing
	held  int      // entries in dense
	top   int64    // the newest id put in order (shed)
	wait  int      // puts shed lets pass before it looks again
	other map[int64]V
	// otherLo and otherHi bound the ids other holds (set by the put that
	// makes it non-empty, widened by later ones, never narrowed): an id
	// outside them is not in it, so a miss for the newest id, the usual
	// one, costs no hashing. Meaningful only while other is non-empty.
	otherLo, otherHi int64
}

// mayHold reports whether other may hold id (false: it certainly does not).
func (t *Table[V]) mayHold(id int64) bool {
	return len(t.other) > 0 && id >= t.otherLo && id <= t.otherHi
}

// putOther files id in the map and widens the map's bounds to it.
func (t *Table[V]) putOther(id int64, v V) {
	if len(t.other) == 0 {
		if t.other == nil {
			t.other = map[int64]V{}
		}
		t.otherLo, t.otherHi = id, id
	} else {
		t.otherLo, t.otherHi = min(t.otherLo, id), max(t.otherHi, id)
	}
	t.other[id] = v
}

// has reports whether index i of dense is held.
func (t *Table[V]) has(i int) bool { return t.bits[i>>6]&(1<<(i&63)) != 0 }

// set files v at index i, held.
func (t *Table[V]) set(i int, v V) {
	t.dense[i] = v
	t.bits[i>>6] |= 1 << (i & 63)
}

// unset empties index i.
func (t *Table[V]) unset(i int) {
	var zero V
	t.dense[i] = zero
	t.bits[i>>6] &^= 1 << (i & 63)
}

// at is id's index in dense, ok when the window covers it (id - base wraps
// for ids far below the base, which the unsigned compare refuses).
func (t *Table[V]) at(id int64) (int, bool) {
	u := uint64(id - t.base)
	return int(u), id >= t.base && u < uint64(len(t.dense))
}

// The map holds only ids outside the window's live part, below base+lo
// or at base+len(dense) and beyond (an id put below lo goes to the map, lo
// and base+lo only grow, and grow and slide adopt the map's ids the window
// comes to cover), so an id in dense[lo:] that dense does not hold is not
// held at all: a miss there costs no map probe.

// Get returns id's value and whether id is held.
func (t *Table[V]) Get(id int64) (V, bool) {
	if i, ok := t.at(id); ok {
		if t.has(i) {
			return t.dense[i], true
		}
		if i >= t.lo {
			var zero V // not held, and not in the map (below): its slot is not read
			return zero, false
		}
	}
	if !t.mayHold(id) {
		var zero V
		return zero, false
	}
	v, ok := t.other[id]
	return v, ok
}

// Put sets id's value.
func (t *Table[V]) Put(id int64, v V) {
	if id > t.top && id-t.top <= 64 {
		t.top = id
	}
	i, in := t.at(id)
	if !in && id >= t.base && !t.reaches(id) && t.shed() {
		i, in = t.at(id) // the window moved (and may have taken id in from the map)
	}
	switch {
	case in && t.has(i):
		t.dense[i] = v
		return
	case in && i >= t.lo: // not in the map either (see Get)
	case !in && t.reaches(id):
		if t.mayHold(id) {
			if _, ok := t.other[id]; ok {
				t.other[id] = v
				return
			}
		}
		if i, in = t.at(id); !in {
			i = int(id - t.base)
			t.grow(i)
		}
	default: // below the oldest entry or far past the window
		t.putOther(id, v)
		return
	}
	t.set(i, v)
	t.held++
}

// reaches reports whether the window may grow to id, past its end: id is
// within Spread (at least 2) times the entries held plus 1024 of its
// oldest live slot. Past
// that the id goes to the map, unless shedding the few old entries that
// hold the window back (shed) brings it within reach.
func (t *Table[V]) reaches(id int64) bool {
	return id >= t.base && uint64(id-t.base)-uint64(t.lo) < uint64(max(t.Spread, 2)*t.held+1024)
}

// shed, when an id is past the window's reach, moves to the map the few
// entries that hold the window's start back — old ids still held while the
// ids after them were deleted in order, as sessions end — and slides the
// window past them, so that it reaches the ids in use again. What it sheds
// lies more than Spread/2 times the entries held plus 1024 below the
// newest id put in order (top, from 0; an id more than 64 past it does not
// move it), where the ids in use are not, and only when that is at least a
// quarter of the window and holds at most one entry in 16 slots. A shed
// passes each slot once (the window's start only moves up), and a look
// that sheds nothing is paid for by an eighth as many puts before the
// next: amortised O(1) a put. It reports whether it shed.
func (t *Table[V]) shed() bool {
	if t.wait > 0 {
		t.wait--
		return false
	}
	n := len(t.dense)
	c := int(min(max(t.top-t.base-int64(max(t.Spread, 2)/2*t.held)-1024, 0), int64(n)))
	if n < 2048 || c-t.lo < n/4 {
		return false
	}
	few := 0
	for i := t.lo; i < c; i++ {
		if t.has(i) {
			if few++; few > (c-t.lo)/16 {
				t.wait = (i - t.lo) / 8
				return false
			}
		}
	}
	for i := t.lo; i < c; i++ {
		if t.has(i) {
			t.putOther(t.base+int64(i), t.dense[i])
			t.unset(i)
			t.held--
		}
	}
	t.lo = c
	t.slide()
	return true
}

// grow extends dense past index i, moving in the map's entries it now covers.
func (t *Table[V]) grow(i int) {
	n := len(t.dense)
	t.resize(max(i+1, 2*n, 1024), n)
	t.adopt(n)
}

// adopt moves into dense the map's entries for the window's indexes from
// from on (past the window before it grew or slid).
func (t *Table[V]) adopt(from int) {
	for k, v := range t.other {
		if i, ok := t.at(k); ok && i >= from {
			t.set(i, v)
			t.held++
			delete(t.other, k)
		}
	}
}

// Delete drops id.
func (t *Table[V]) Delete(id int64) {
	i, ok := t.at(id)
	if ok && !t.has(i) && i >= t.lo {
		return // not held (see Get)
	}
	if ok && t.has(i) {
		t.unset(i)
		t.held--
		if t.lo < len(t.dense) && !t.has(t.lo) { // i was lo, or lo was never filled
			t.slide()
		}
		return
	}
	delete(t.other, id)
}

// slide moves lo past the empty slots at the window's start, and the window
// itself up once its first half is empty: each slot is passed once between
// two moves, and a move copies at most the half still in use.
func (t *Table[V]) slide() {
	for t.lo < len(t.dense) && !t.has(t.lo) {
		t.lo++
	}
	n := len(t.dense)
	if t.lo < 1024 || 2*t.lo < n {
		return
	}
	k := copy(t.dense, t.dense[t.lo:])
	clear(t.dense[k:])
	t.moveBits(t.lo, k)
	t.base += int64(t.lo)
	t.lo = 0
	if len(t.other) > 0 {
		t.adopt(k)
	}
	t.shrink()
}

// moveBits moves the held bits of [lo, lo+k) down to [0, k), a word at a
// time, and clears the rest. Reads run ahead of writes (lo ≥ 1024), so
// the move is in place.
func (t *Table[V]) moveBits(lo, k int) {
	w, sh := lo>>6, uint(lo&63)
	nw := (k + 63) >> 6
	for j := range nw {
		x := t.bits[w+j] >> sh
		if sh != 0 && w+j+1 < len(t.bits) {
			x |= t.bits[w+j+1] << (64 - sh)
		}
		t.bits[j] = x
	}
	if r := k & 63; r != 0 {
		t.bits[k>>6] &= 1<<r - 1
	}
	clear(t.bits[nw:])
}

// shrink halves the slice, after a slide, when its entries sit in its
// first quarter: a window keeps the length the most ids it once spanned
// needed (a burst, or old ids shed since), and a worker's tables spread
// over many slots an entry (Spread). Growth doubles again past half, so a
// shrink comes at most once in a quarter of the length of ids passed, and
// its scan and copy cost amortised O(1) an id.
func (t *Table[V]) shrink() {
	n := len(t.dense)
	if n < 8192 {
		return
	}
	hi := n
	for hi > n/4 && !t.has(hi-1) {
		hi--
	}
	if hi > n/4 {
		return
	}
	t.resize(n/2, hi)
}

// resize makes dense n slots long, keeping its first keep (and their bits).
func (t *Table[V]) resize(n, keep int) {
	d := make([]V, n)
	copy(d, t.dense[:keep])
	b := make([]uint64, (n+63)>>6)
	copy(b, t.bits[:(keep+63)>>6])
	if r := keep & 63; r != 0 { // bits past keep in its last word are not kept
		b[keep>>6] &= 1<<r - 1
	}
	t.dense, t.bits = d, b
}

// Each calls f on every value held, in no set order.
func (t *Table[V]) Each(f func(V)) {
	for i := t.lo; i < len(t.dense); i++ {
		if t.has(i) {
			f(t.dense[i])
		}
	}
	for _, v := range t.other {
		f(v)
	}
}

// Len is the number of ids held.
func (t *Table[V]) Len() int { return t.held + len(t.other) }

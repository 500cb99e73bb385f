// Package idtable maps int64 ids that mostly come in increasing order (a
// trace's chat ids, numbered 0, 1, 2, … in file order) to values: ids in a
// dense window sit in a slice indexed by id less the window's base, any
// other id (negative, huge, below the oldest entry the window holds, far
// past it) in a map. Where entries are deleted about as they were added
// (the requests in flight of a replay) the window slides: once its first
// half holds nothing, the rest moves down and the base up, so its memory
// follows the ids between the oldest entry held and the newest, and a get,
// put or delete is a slice access, not a map's hashing. It is the trace
// checker's chat table (trace/check.go) and the replay's requests in flight.
package idtable

// Table is the map; the zero value is empty and ready.
type Table[V any] struct {
	dense []slot[V] // dense[id-base].held: id is held
	base  int64     // the id dense[0] stands for
	lo    int       // dense[:lo] holds nothing
	held  int       // entries in dense
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

type slot[V any] struct {
	v    V
	held bool
}

// at is id's index in dense, ok when the window covers it (id - base wraps
// for ids far below the base, which the unsigned compare refuses).
func (t *Table[V]) at(id int64) (int, bool) {
	u := uint64(id - t.base)
	return int(u), id >= t.base && u < uint64(len(t.dense))
}

// Get returns id's value and whether id is held.
func (t *Table[V]) Get(id int64) (V, bool) {
	if i, ok := t.at(id); ok && t.dense[i].held {
		return t.dense[i].v, true
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
	i, in := t.at(id)
	switch {
	case in && t.dense[i].held:
		t.dense[i].v = v
		return
	case in && i >= t.lo:
		if t.mayHold(id) { // held in the map since before the window reached it?
			if _, ok := t.other[id]; ok {
				t.other[id] = v
				return
			}
		}
	case !in && id >= t.base && uint64(id-t.base)-uint64(t.lo) < uint64(2*t.held+1024):
		if t.mayHold(id) {
			if _, ok := t.other[id]; ok {
				t.other[id] = v
				return
			}
		}
		i = int(id - t.base)
		t.grow(i)
	default: // below the oldest entry or far past the window
		if t.other == nil {
			t.other = map[int64]V{}
		}
		if len(t.other) == 0 {
			t.otherLo, t.otherHi = id, id
		} else {
			t.otherLo, t.otherHi = min(t.otherLo, id), max(t.otherHi, id)
		}
		t.other[id] = v
		return
	}
	t.dense[i] = slot[V]{v: v, held: true}
	t.held++
}

// grow extends dense past index i, moving in the map's entries it now covers.
func (t *Table[V]) grow(i int) {
	n := len(t.dense)
	d := make([]slot[V], max(i+1, 2*n, 1024))
	copy(d, t.dense)
	t.dense = d
	t.adopt(n)
}

// adopt moves into dense the map's entries for the window's indexes from
// from on (past the window before it grew or slid).
func (t *Table[V]) adopt(from int) {
	for k, v := range t.other {
		if i, ok := t.at(k); ok && i >= from {
			t.dense[i] = slot[V]{v: v, held: true}
			t.held++
			delete(t.other, k)
		}
	}
}

// Delete drops id.
func (t *Table[V]) Delete(id int64) {
	if i, ok := t.at(id); ok && t.dense[i].held {
		t.dense[i] = slot[V]{}
		t.held--
		if t.lo < len(t.dense) && !t.dense[t.lo].held { // i was lo, or lo was never filled
			t.slide()
		}
		return
	}
	if t.mayHold(id) {
		delete(t.other, id)
	}
}

// slide moves lo past the empty slots at the window's start, and the window
// itself up once its first half is empty: each slot is passed once between
// two moves, and a move copies at most the half still in use.
func (t *Table[V]) slide() {
	for t.lo < len(t.dense) && !t.dense[t.lo].held {
		t.lo++
	}
	n := len(t.dense)
	if t.lo < 1024 || 2*t.lo < n {
		return
	}
	k := copy(t.dense, t.dense[t.lo:])
	clear(t.dense[k:])
	t.base += int64(t.lo)
	t.lo = 0
	if len(t.other) > 0 {
		t.adopt(k)
	}
}

// Len is the number of ids held.
func (t *Table[V]) Len() int { return t.held + len(t.other) }

package trace

// chatTable maps chat ids to their records. Traces number their chats
// 0, 1, 2, … in file order (every converter does), so ids in the table's
// dense window sit in a slice indexed by id less the window's base; any
// other id (negative, huge, far past what was seen, below the oldest record
// the window holds) goes to a map. The checker looks a chat up two or three
// times a line, and the map's hashing and growth were most of its cost.
// The window grows only to hold an id under twice the records it holds plus
// 1,024 past its oldest record, so it stays within about eight slots a
// record (and four when nothing is deleted); and when
// records are deleted oldest first (a checker that forgets sessions, or
// closes them after their last turn) it slides: once its first half holds
// none, the rest moves down and the base up, so its memory follows the ids
// between the oldest record held and the newest, not the highest id.
type chatTable struct {
	dense []chatRef // dense[id-base].held: id is recorded
	base  int64     // the id dense[0] stands for
	lo    int       // dense[:lo] holds no record
	held  int       // records in dense
	other map[int64]chatRef
}

// slot is id's index in dense, ok when the window covers it (id - base
// wraps for ids far below the base, which the unsigned compare refuses).
func (t *chatTable) slot(id int64) (int, bool) {
	u := uint64(id - t.base)
	return int(u), id >= t.base && u < uint64(len(t.dense))
}

func (t *chatTable) get(id int64) (chatRef, bool) {
	if i, ok := t.slot(id); ok && t.dense[i].held {
		return t.dense[i], true
	}
	if len(t.other) == 0 {
		return chatRef{}, false
	}
	r, ok := t.other[id]
	return r, ok
}

// put records id, which the table does not hold.
func (t *chatTable) put(id int64, r chatRef) {
	r.held = true
	i, in := t.slot(id)
	switch {
	case in && i >= t.lo:
	case !in && id >= t.base && uint64(id-t.base)-uint64(t.lo) < uint64(2*t.held+1024):
		i = int(id - t.base)
		t.grow(i)
	default: // below the oldest record or far past the window
		if t.other == nil {
			t.other = map[int64]chatRef{}
		}
		t.other[id] = r
		return
	}
	t.dense[i] = r
	t.held++
}

// grow extends dense past slot i, moving in the map's entries it now covers.
func (t *chatTable) grow(i int) {
	n := len(t.dense)
	d := make([]chatRef, max(i+1, 2*n, 1024))
	copy(d, t.dense)
	t.dense = d
	t.adopt(n)
}

// adopt moves into dense the map's entries for the window's slots from
// slot from on (slots that were past the window before it grew or slid).
func (t *chatTable) adopt(from int) {
	for k, r := range t.other {
		if i, ok := t.slot(k); ok && i >= from {
			t.dense[i] = r
			t.held++
			delete(t.other, k)
		}
	}
}

func (t *chatTable) del(id int64) {
	if i, ok := t.slot(id); ok && t.dense[i].held {
		t.dense[i] = chatRef{}
		t.held--
		if t.lo < len(t.dense) && !t.dense[t.lo].held { // i was lo, or lo was never filled
			t.slide()
		}
		return
	}
	delete(t.other, id)
}

// slide moves lo past the empty slots at the window's start, and the window
// itself up once its first half is empty: each slot is passed once between
// two moves, and a move copies at most the half still in use.
func (t *chatTable) slide() {
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

func (t *chatTable) len() int { return t.held + len(t.other) }

package trace

// chatTable maps chat ids to their records. Traces number their chats
// 0, 1, 2, … in file order (every converter does), so ids below the table's
// dense bound sit in a slice indexed by id; any other id (negative, huge,
// far past what was seen) goes to a map. The checker looks a chat up two or
// three times a line, and the map's hashing and growth were most of its
// cost. The dense part grows only to hold an id under twice the records it
// holds plus 1,024, so about half its slots or more are used. A checker
// that forgets sessions keeps everything in the map, whose memory follows
// the chats it still holds (the slice's would follow the highest id).
type chatTable struct {
	dense   []chatRef // dense[id].held: id is recorded
	held    int       // records in dense
	other   map[int64]chatRef
	mapOnly bool
}

func (t *chatTable) get(id int64) (chatRef, bool) {
	if uint64(id) < uint64(len(t.dense)) {
		r := t.dense[id]
		return r, r.held
	}
	r, ok := t.other[id]
	return r, ok
}

// put records id, which the table does not hold.
func (t *chatTable) put(id int64, r chatRef) {
	r.held = true
	if uint64(id) >= uint64(len(t.dense)) && (t.mapOnly || id < 0 || id >= 2*int64(t.held)+1024) {
		if t.other == nil {
			t.other = map[int64]chatRef{}
		}
		t.other[id] = r
		return
	}
	if id >= int64(len(t.dense)) {
		t.grow(id)
	}
	t.dense[id] = r
	t.held++
}

// grow extends dense past id, moving in the map's entries it now covers.
func (t *chatTable) grow(id int64) {
	n := int64(len(t.dense))
	d := make([]chatRef, max(id+1, 2*n, 1024))
	copy(d, t.dense)
	t.dense = d
	for k, r := range t.other {
		if k >= n && k < int64(len(d)) {
			t.dense[k] = r
			t.held++
			delete(t.other, k)
		}
	}
}

func (t *chatTable) del(id int64) {
	if uint64(id) < uint64(len(t.dense)) {
		if t.dense[id].held {
			t.dense[id] = chatRef{}
			t.held--
		}
		return
	}
	delete(t.other, id)
}

func (t *chatTable) len() int { return t.held + len(t.other) }

package idtable

// Key names a session (or any record a caller numbers) to a Keyed table:
// its id, and the dense number its owner gave it, 0 when the owner gives
// none. A number is unique for the run: never given to another id, so the
// table may file a record under it alone.
type Key struct {
	ID  string
	Num int64
}

// Keyed holds records by Key: by number, in a Table (a slice while the
// numbers come in order), when the key has one, and by id in a map when it
// has none. The simulator numbers its sessions once where they enter
// (their first request) and carries the number on every request, so the
// engine's and the control plane's per-session records cost a slice
// access instead of a string hash; the gateway and the emulated worker,
// which see only ids on the wire, give none and keep the map. A caller
// names one session the same way in every call: a record filed under a
// number is not found by the id alone.
type Keyed[V any] struct {
	byNum Table[V]
	byID  map[string]V
}

// keyedSpread is Keyed's Table.Spread: each of a pool's workers holds
// about one session number in the pool's size, and the shed keeps what
// holds one slot in 16 (Table.shed), so a pool of up to 16 keeps its
// workers' sessions in the slice.
const keyedSpread = 16

// Get returns k's record and whether there is one.
func (m *Keyed[V]) Get(k Key) (V, bool) {
	if k.Num != 0 {
		return m.byNum.Get(k.Num)
	}
	v, ok := m.byID[k.ID]
	return v, ok
}

// Put sets k's record.
func (m *Keyed[V]) Put(k Key, v V) {
	if k.Num != 0 {
		m.byNum.Spread = keyedSpread
		m.byNum.Put(k.Num, v)
		return
	}
	if m.byID == nil {
		m.byID = map[string]V{}
	}
	m.byID[k.ID] = v
}

// Delete drops k's record.
func (m *Keyed[V]) Delete(k Key) {
	if k.Num != 0 {
		m.byNum.Delete(k.Num)
		return
	}
	delete(m.byID, k.ID)
}

// DeleteIf drops every record drop reports true for.
func (m *Keyed[V]) DeleteIf(drop func(V) bool) {
	t := &m.byNum
	var ids []int64 // deleted after the walk: a delete may slide the window
	for i := t.lo; i < len(t.dense); i++ {
		if t.has(i) && drop(t.dense[i]) {
			ids = append(ids, t.base+int64(i))
		}
	}
	for k, v := range t.other {
		if drop(v) {
			ids = append(ids, k)
		}
	}
	for _, id := range ids {
		t.Delete(id)
	}
	for k, v := range m.byID {
		if drop(v) {
			delete(m.byID, k)
		}
	}
}

// Len is the number of records held.
func (m *Keyed[V]) Len() int { return m.byNum.Len() + len(m.byID) }

// Each calls f on every record, in no set order.
func (m *Keyed[V]) Each(f func(V)) {
	m.byNum.Each(f)
	for _, v := range m.byID {
		f(v)
	}
}

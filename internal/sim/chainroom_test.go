package sim

import "testing"

// A session's last turn (SessionEnds) gets a chain with no room to grow,
// in each case where a turn starts a new array; any other turn keeps the
// room for the turns to come, and the view is the same ids either way.
func TestLastTurnChainHasNoRoom(t *testing.T) {
	ids := func(n int, base uint64) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = base + uint64(i)
		}
		return out
	}
	cases := []struct {
		name string
		sess func() *session
		ids  []uint64
	}{
		{"first turn", func() *session { return &session{} }, ids(24, 1)},
		{"out of room", func() *session { return &session{chain: ids(8, 1)[:8:8]} }, ids(40, 1)},
		{"frozen array, caches keying on it", func() *session { return &session{chain: ids(8, 1), frozen: true} }, ids(30, 100)},
	}
	for _, c := range cases {
		for _, last := range []bool{false, true} {
			s, sess := &Sim{}, c.sess()
			view, shared := s.adoptChain(sess, c.ids, last)
			if len(view) != len(c.ids) || shared {
				t.Fatalf("%s, last=%v: view of %d ids, shared %v; want %d, false", c.name, last, len(view), shared, len(c.ids))
			}
			for i := range view {
				if view[i] != c.ids[i] {
					t.Fatalf("%s, last=%v: id %d is %d, want %d", c.name, last, i, view[i], c.ids[i])
				}
			}
			room := cap(sess.chain) - len(c.ids)
			if last && room*8 > len(c.ids) { // what a size class rounds up at most
				t.Errorf("%s: the last turn's chain has room for %d more ids", c.name, room)
			}
			if !last && room < 16 {
				t.Errorf("%s: a turn that is not the last got room for %d more ids, want at least 16", c.name, room)
			}
		}
	}
}

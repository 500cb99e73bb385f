package idtable

import "testing"

// The replay's pattern: 100,000 ids in order, each looked up once and
// deleted 200 later (the requests in flight at 400/s), in the table and in
// the map it replaced.
//
//	go test ./internal/idtable -run '^$' -bench . -cpu 1 -count 6
const benchIDs, benchLive = 100000, 200

func BenchmarkTableInFlight(b *testing.B) {
	v := new(int)
	for b.Loop() {
		var t Table[*int]
		for id := range int64(benchIDs) {
			t.Put(id, v)
			if _, ok := t.Get(id - 1); !ok && id > 0 {
				b.Fatal(id)
			}
			if id >= benchLive {
				t.Delete(id - benchLive)
			}
		}
	}
}

func BenchmarkMapInFlight(b *testing.B) {
	v := new(int)
	for b.Loop() {
		t := map[int64]*int{}
		for id := range int64(benchIDs) {
			t[id] = v
			if _, ok := t[id-1]; !ok && id > 0 {
				b.Fatal(id)
			}
			if id >= benchLive {
				delete(t, id-benchLive)
			}
		}
	}
}

package emulator

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/model"
)

// storeDecoder is a session-aware decoder (4,000-token HBM pool, host 3 ×
// it, Mooncake storage, wait_complete) whose storage pool is the one at
// the loopback service url.
func storeDecoder(t *testing.T, name, url string) *engine.Worker {
	t.Helper()
	p, err := model.Builtin("qwen3-30b-a3b", "h200-141g")
	if err != nil {
		t.Fatal(err)
	}
	w, err := engine.New(engine.Config{Name: name, Role: engine.RoleDecode, Profile: p, BlockSize: 64, PoolTokens: 4000,
		Session: engine.SessionConfig{Enabled: true, Eviction: engine.EvictSession},
		HiCache: engine.HiCacheConfig{Enabled: true, Ratio: 3, WritePolicy: engine.WriteThrough,
			Storage: engine.StorageConfig{Enabled: true, Backend: "mooncake", Prefetch: engine.PrefetchWaitComplete, Index: NewStoreClient(url)}}})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func blocks(ns uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = ns<<32 | uint64(i+1)
	}
	return out
}

// Two decoders in this process, each reaching the pool only through the
// loopback service, see one store: d1 seeds session a's 1,280 tokens (20
// blocks of 64), written through to its host tier and on to the shared
// pool; d2, which never held a, answers a's 1,344-token turn with a seed
// naming the 1,280 tokens the pool holds (tier storage), and both read
// the pool's 1,280 tokens used. The first to open the pool sized it: 4 ×
// d1's host pool of 12,000 = 48,000 tokens. A worker of another block
// size is refused, and a service that is gone answers as an empty pool.
func TestStoreServiceSharedByWorkers(t *testing.T) {
	srv := httptest.NewServer(NewStoreServer())
	defer srv.Close()
	d1, d2 := storeDecoder(t, "d1", srv.URL), storeDecoder(t, "d2", srv.URL)
	a := blocks(1, 21)
	r := &engine.Request{ID: 1, Kind: engine.DecodeOnly, Session: "a", KeepSession: true, Blocks: a[:20], Input: 1280, Output: 1}
	if err := d1.Reserve(0, r); err != nil {
		t.Fatal(err)
	}
	if err := d1.StartDecode(0, r); err != nil {
		t.Fatal(err)
	}
	for now, i := 0.0, 0; r.Stage != engine.StageDone && i < 100; i++ {
		next, ok := d1.NextTime()
		if !ok {
			break
		}
		now = max(now, next)
		d1.Advance(now)
	}
	if r.Stage != engine.StageDone {
		t.Fatalf("d1's seed of a did not finish (stage %d)", r.Stage)
	}
	if u1, u2 := d1.StorageUsed(), d2.StorageUsed(); u1 != 1280 || u2 != 1280 || d2.StorageCapacity() != 48000 {
		t.Fatalf("pool used %d (d1) and %d (d2), capacity %d; want 1280 both, 48,000", u1, u2, d2.StorageCapacity())
	}
	rep := d2.AdmitSession(1, engine.AdmitQuery{Session: "a", Blocks: a, Input: 1344, Output: 4})
	if !rep.CanAdmit || rep.Mode != engine.AdmitSeed || rep.Tier != engine.TierStorage || rep.StorageTokens != 1280 {
		t.Fatalf("d2 answered %+v; want a seed naming a's 1,280 tokens in the shared pool", rep)
	}
	if _, err := NewStoreClient(srv.URL).Open(16, 1000); err == nil {
		t.Fatal("a worker of 16-token blocks joined a pool of 64-token blocks")
	}
	c := NewStoreClient(srv.URL)
	srv.Close()
	if n, tok := c.Match(a, 64); n != 0 || tok != 0 || c.Failures() != 1 {
		t.Fatalf("a gone service matched %d blocks, %d tokens, %d failures; want nothing, 1 failure", n, tok, c.Failures())
	}
}

// The storage service answers any body on any route without panicking: a
// clear 4xx for what it cannot take (a bad body, no blocks, a last block
// outside 1..block size, a pool not opened, an unknown route), 200 else;
// the pool stays within its capacity.
func FuzzStoreServer(f *testing.F) {
	f.Add("/storage/open", []byte(`{"block_size":4,"capacity":40}`))
	f.Add("/storage/write", []byte(`{"blocks":[1,2,3],"last":4}`))
	f.Add("/storage/write", []byte(`{"blocks":[1,2,3],"last":9}`))
	f.Add("/storage/match", []byte(`{"blocks":[1,2],"last":2}`))
	f.Add("/storage/touch", []byte(`{"blocks":[1],"last":-1}`))
	f.Add("/storage/tokens", []byte(`{}`))
	f.Add("/storage/nope", []byte(`[`))
	f.Add("/storage/book", []byte(`{"start":1,"bytes":1000,"epoch_ns":1,"scale":1}`))
	f.Add("/storage/book", []byte(`{"start":-1,"bytes":1000,"epoch_ns":1,"scale":0}`))
	f.Add("/storage/queue", []byte(`{"start":1,"epoch_ns":1,"scale":1}`))
	f.Add("/storage/queue", []byte(`{"start":1,"epoch_ns":0,"scale":-1}`))
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		s := NewStoreServer()
		s.BandwidthBytes = 1e9
		open := httptest.NewRequest(http.MethodPost, "/storage/open", bytes.NewReader([]byte(`{"block_size":4,"capacity":40}`)))
		s.ServeHTTP(httptest.NewRecorder(), open)
		for range 2 { // twice: a write, then the same path again
			req := httptest.NewRequest(http.MethodPost, "/storage/write", bytes.NewReader(body))
			req.URL.Path = path
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK && (rec.Code < 400 || rec.Code > 499) {
				t.Fatalf("%s %q: HTTP %d", path, body, rec.Code)
			}
		}
		if s.idx != nil && s.idx.Tokens() > 40 {
			t.Fatalf("pool holds %d tokens, capacity 40", s.idx.Tokens())
		}
	})
}

// The storage service refuses what would corrupt its index, naming the
// field: a last block of more tokens than a block holds (9 of 4: the path
// would claim 4 + 4 + 9 = 17 tokens in 3 blocks of 4), or of none, or no
// blocks; the pool stays empty. A route before open, and a bad open, too.
func TestStoreServerRefusesBadPaths(t *testing.T) {
	s := NewStoreServer()
	post := func(path, body string) (int, string) {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader([]byte(body))))
		return rec.Code, rec.Body.String()
	}
	if code, _ := post("/storage/match", `{"blocks":[1],"last":1}`); code != http.StatusConflict {
		t.Fatalf("a match before open: HTTP %d, want 409", code)
	}
	if code, _ := post("/storage/open", `{"block_size":0,"capacity":40}`); code != http.StatusBadRequest {
		t.Fatalf("an open of 0-token blocks: HTTP %d, want 400", code)
	}
	if code, _ := post("/storage/open", `{"block_size":4,"capacity":40}`); code != http.StatusOK {
		t.Fatalf("open: HTTP %d", code)
	}
	for _, body := range []string{`{"blocks":[1,2,3],"last":9}`, `{"blocks":[1,2,3],"last":0}`, `{"blocks":[],"last":4}`, `[`} {
		if code, msg := post("/storage/write", body); code != http.StatusBadRequest {
			t.Fatalf("write %s: HTTP %d %s, want 400", body, code, msg)
		}
	}
	if s.idx.Tokens() != 0 {
		t.Fatalf("the pool took %d tokens of bad writes", s.idx.Tokens())
	}
	if code, _ := post("/storage/write", `{"blocks":[1,2,3],"last":4}`); code != http.StatusOK || s.idx.Tokens() != 12 {
		t.Fatalf("a good write: HTTP %d, pool %d tokens; want 200, 12", code, s.idx.Tokens())
	}
}

// The service's LRU follows the order calls reach it, and its edges: a
// pool of 16 tokens (4-token blocks) takes a's and b's 8 each; a is
// touched, so c's write evicts b, the least recently used, not a. A last
// block of 1 token is a path; a pool of 0 tokens is refused.
func TestStoreServerLRUAndEdges(t *testing.T) {
	s := NewStoreServer()
	post := func(path, body string) int {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader([]byte(body))))
		return rec.Code
	}
	if code := post("/storage/open", `{"block_size":4,"capacity":0}`); code != http.StatusBadRequest {
		t.Fatalf("an open of a 0-token pool: HTTP %d, want 400", code)
	}
	if code := post("/storage/open", `{"block_size":4,"capacity":16}`); code != http.StatusOK {
		t.Fatalf("open: HTTP %d", code)
	}
	for _, body := range []string{`{"blocks":[1,2],"last":4}`, `{"blocks":[3,4],"last":4}`} {
		if code := post("/storage/write", body); code != http.StatusOK {
			t.Fatalf("write %s: HTTP %d", body, code)
		}
	}
	post("/storage/touch", `{"blocks":[1,2],"last":4}`)
	post("/storage/write", `{"blocks":[5,6],"last":4}`)
	if _, a := s.idx.Match([]uint64{1, 2}, 4); a != 8 {
		t.Fatalf("a, touched last, holds %d tokens after c's write, want 8", a)
	}
	if _, b := s.idx.Match([]uint64{3, 4}, 4); b != 0 {
		t.Fatalf("b, least recently used, holds %d tokens, want 0 (evicted)", b)
	}
	if code := post("/storage/write", `{"blocks":[7],"last":1}`); code != http.StatusOK {
		t.Fatalf("a 1-token path: HTTP %d, want 200", code)
	}
}

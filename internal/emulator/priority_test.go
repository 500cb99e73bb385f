package emulator

import (
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// TestPrefillPriorityEvictionOverHTTP: on a prefill worker with
// PriorityEviction a KVC seed's prompt (its legs name a session_id) is
// evicted before a plain-PD prompt, though the plain one is older; without
// it the LRU order evicts the older plain prompt first. A third prompt
// forces the eviction; a repeat of each earlier prompt reports on P's leg
// how much of it is still cached (the survivor is probed first, so that
// its repeat, which needs at most a block, barely touches the victim).
func TestPrefillPriorityEvictionOverHTTP(t *testing.T) {
	const n, pool = 7680, 20000 // two prompts of 120 blocks; the third needs room for all but ~42 of them
	plain, seed, third := ids(1, n), ids(2, n), ids(3, 9600)
	for _, prio := range []bool{false, true} {
		p := start(t, Config{Role: engine.RolePrefill, PoolTokens: pool, PriorityEviction: prio, TimeScale: 20})
		d := start(t, Config{Role: engine.RoleDecode, TimeScale: 20})
		room := uint64(0)
		// leg runs one request's PD legs and returns P's cached_tokens.
		leg := func(prompt []int, sess string) int {
			room++
			body := pdBody(p, "r"+itoa(int(room)), room, prompt, 2)
			if sess != "" {
				body["session_id"] = sess // a KVC seed: the gateway keeps session_id in both legs
			}
			go postQuiet(t, d.URL()+"/generate", copyBody(body))
			st, b := post(t, p.URL()+"/generate", copyBody(body))
			if st != 200 {
				t.Fatalf("prefill leg %d: %d %s", room, st, b)
			}
			return decodeOut(t, b).MetaInfo.CachedTokens
		}
		leg(plain, "") // B: plain PD, the older
		leg(seed, "s") // A: a seed, the newer
		leg(third, "") // forces an eviction
		survivor, victim, sName, vName := seed, plain, "seed", "plain"
		if prio {
			survivor, victim, sName, vName = plain, seed, "plain", "seed"
		}
		sc, vc := leg(survivor, ""), leg(victim, "")
		t.Logf("priority eviction %v: %s repeat cached %d, %s repeat cached %d (of %d)", prio, sName, sc, vName, vc, n)
		if sc < n-64 || vc > n-1000 {
			t.Fatalf("priority eviction %v: the %s prompt's repeat cached %d tokens, the %s's %d, of %d; want the %s's gone first",
				prio, sName, sc, vName, vc, n, vName)
		}
	}
}

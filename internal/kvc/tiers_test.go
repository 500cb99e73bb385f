package kvc

import (
	"strings"
	"testing"
)

// TestSessionDemotedKeepsBelief: a decoder's report that it demoted a
// session to its host tier keeps the session pinned there in the router's
// belief (Tier host), so its next turn is asked of that decoder first and
// goes direct when the decoder admits it from host, the path saying so;
// the placement makes the session HBM-resident again. An eviction report
// instead forgets it (Tier none). A demotion reported by a decoder the
// session has left is an eviction there.
func TestSessionDemotedKeepsBelief(t *testing.T) {
	w := newLabelWorld(t, nil, Options{Alpha: 1})
	w.run("s", 1, seedAll, true)
	if got := w.x.Tier("s"); got != TierHBM {
		t.Fatalf("after the seed: tier %q, want hbm", got)
	}
	w.x.SessionDemoted(0, "s")
	if got := w.x.Tier("s"); got != TierHost {
		t.Fatalf("after the demotion: tier %q, want host", got)
	}
	var asked []int
	d := w.run("s", 2, func(i int) AdmitReply {
		asked = append(asked, i)
		if i == 0 {
			return AdmitReply{CanAdmit: true, Direct: true, Tier: TierHost, CachedTokens: 160, HostTokens: 150}
		}
		return seedAll(i)
	}, true)
	if len(asked) == 0 || asked[0] != 0 || d.Decoder() != 0 || d.Mode() != "kvcache-direct-to-d-session" {
		t.Fatalf("turn 2 asked %v, went to d%d as %q; want d0 first, direct", asked, d.Decoder(), d.Mode())
	}
	if p := strings.Join(d.Path(), "; "); !strings.Contains(p, "from its host tier (150 of 160 cached tokens loaded back)") {
		t.Fatalf("path %q does not say the append loaded from host", p)
	}
	if got := w.x.Tier("s"); got != TierHBM {
		t.Fatalf("after the append: tier %q, want hbm", got)
	}
	w.x.SessionDemoted(1, "s") // d1 never held it: an eviction there, d0 kept
	if got := w.x.Tier("s"); got != TierHBM {
		t.Fatalf("a demotion on another decoder: tier %q, want hbm", got)
	}
	w.x.SessionEvicted(0, "s")
	if got := w.x.Tier("s"); got != TierNone {
		t.Fatalf("after the eviction: tier %q, want none", got)
	}
}

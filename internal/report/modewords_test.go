package report

import (
	"bytes"
	"strings"
	"testing"
)

// Every execution mode the dispatcher writes reads in plain words; a
// label this version does not know gets none rather than a wrong one.
func TestModeWords(t *testing.T) {
	for _, m := range []string{
		"pd-disaggregation-router", "dp-colo-router", "kvcache-direct-to-d-session", "pd-router-turn1-seed", "pd-router-no-session",
		"pd-router-turn1-d-backpressure",
		"pd-router-d-session-reseed", "pd-router-d-session-reseed-after-eviction", "pd-router-d-session-reseed-after-prefill-backed-eviction",
		"pd-router-session-not-resident-reseed", "pd-router-session-was-evicted-reseed", "pd-router-no-direct-info-reseed",
		"pd-router-real-large-append-reseed", "pd-router-real-large-append-reseed-after-eviction", "pd-router-policy-no-bypass-reseed",
		"pd-router-policy-no-bypass-reseed-after-eviction", "pd-router-other-large-append-reseed",
		"pd-router-fallback-real-large-append-session-cap", "pd-router-fallback-session-not-resident-session-cap",
		"pd-router-fallback-policy-no-bypass-session-cap", "pd-router-fallback-session-not-resident-seed-filter-early-turn",
		"pd-router-fallback-no-d-capacity", "pd-router-fallback-real-large-append", "pd-router-fallback-policy-no-bypass",
		"pd-router-fallback-session-not-resident", "pd-router-fallback-session-was-evicted-no-d-capacity",
		"pd-router-fallback-other-large-append-no-d-capacity", "pd-router-fallback-other-large-append-d-backpressure",
		"pd-router-fallback-no-direct-info-no-d-capacity",
		"kvcache-local-seed-on-d", "kvcache-local-reseed-on-d", "kvcache-direct-to-d-large-append", "kvcache-local-fallback-on-d", "kvcache-whole-on-p",
		"pd-conditional-local-prefill-on-d", "pd-conditional-disagg-router", "pd-prefix-decider-decode-only", "pd-prefix-decider-disagg-router",
		"pd-decode-radix-delta-router", "pd-ppd-turn1-router", "pd-ppd-append-on-d", "pd-ppd-disagg-router",
		"pd-deflect-prefill-on-d", "pd-deflect-disagg-router",
		"pd-router-turn1-seed-via-plain-pd", "pd-router-d-session-reseed-via-delta-pd", "kvcache-direct-to-d-session-via-local-prefill",
		"kvcache-local-seed-on-d-via-local-prefill", "pd-router-fallback-real-large-append-via-local-prefill",
	} {
		if ModeWords(m) == "" {
			t.Errorf("%s has no plain words", m)
		}
	}
	if w := ModeWords("pd-router-real-large-append-reseed-after-eviction"); w != "KVC reseed: the session's context prefilled on P and sent to a decoder again: the new tokens exceed the direct-append limit (--direct-max-uncached-tokens), after an eviction" {
		t.Errorf("composed words %q", w)
	}
	for _, m := range []string{"pd-router-fallback-martian", "something-else", "pd-router-x-reseed", "something-via-plain-pd"} {
		if w := ModeWords(m); w != "" {
			t.Errorf("unknown %s read as %q", m, w)
		}
	}
	runs := []*Run{oneModeRun("pd", "pd-disaggregation", "pd-disaggregation-router", 20), oneModeRun("kvc", "kvcache-centric", "kvcache-whole-on-p", 20)}
	runs[0].Summary.ExecutionModes = map[string]int{"pd-disaggregation-router": 20}
	runs[1].Summary.ExecutionModes = map[string]int{"kvcache-whole-on-p": 20}
	var b bytes.Buffer
	if err := Render(&b, runs, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `id="mode-legend"`) || !strings.Contains(b.String(), "served whole, prefill and decode, on the prefill worker") {
		t.Error("the report has no mode legend in plain words")
	}
}

// When one run's TTFT p95 is 100× the others', the linear body serves the
// fast runs (not the pooled p95, which crushed them into a pixel), and a
// TTFT CDF stands beside the density.
func TestReportBodyWindowByRuns(t *testing.T) {
	mk := func(name, mech string, scale float64) *Run {
		r := oneModeRun(name, mech, "m", 200)
		for i := range r.Requests {
			r.Requests[i].TTFTS = scale * float64(1+i%20) / 20
		}
		return r
	}
	vs := newViews([]*Run{mk("pd", "pd-disaggregation", 40), mk("dp", "pd-colo", 0.4), mk("kvc", "kvcache-centric", 0.3)})
	cut, note := bodyCut(vs, 95)
	if cut > 0.5 || !strings.Contains(note, "within 10× of the fastest") {
		t.Errorf("body cut %g (%s), want the fast runs' p95 ≈ 0.38 s", cut, note)
	}
	same := newViews([]*Run{mk("dp", "pd-colo", 0.4), mk("kvc", "kvcache-centric", 0.3)})
	if _, note := bodyCut(same, 95); !strings.HasPrefix(note, "the pooled p95") {
		t.Errorf("runs of one scale: %s, want the pooled p95", note)
	}
	var b bytes.Buffer
	if err := Render(&b, []*Run{mk("pd", "pd-disaggregation", 40), mk("dp", "pd-colo", 0.4)}, Options{}); err != nil {
		t.Fatal(err)
	}
	d, c := strings.Index(b.String(), `id="ttft-density-linear"`), strings.Index(b.String(), `id="ttft-cdf"`)
	if d < 0 || c < d {
		t.Errorf("TTFT CDF at %d, linear density at %d: want the CDF right after the density", c, d)
	}
}

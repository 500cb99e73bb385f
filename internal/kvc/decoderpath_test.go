package kvc

import "testing"

// The path order of the issue: the extension, local prefill (conditional
// aggregation with the decode radix cache), delta PD, plain PD; each kind
// reads back as itself.
func TestDecoderPath(t *testing.T) {
	want := map[string]string{KindExtended: PathExtension, KindCondAggRdx: PathLocalPrefill, KindDecodeRadix: PathDeltaPD,
		KindCondAgg: PathPlainPD, KindStock: PathPlainPD}
	for _, k := range DecoderKinds {
		c, err := ParseDecoderKind(k)
		if err != nil || c.Path() != want[k] {
			t.Errorf("%s: %+v %v, path %s, want %s", k, c, err, c.Path(), want[k])
		}
		// What a decoder keeps: all but the plain-PD kinds (stock, and
		// conditional aggregation alone: a chunk cache).
		if c.Keeps() != (want[k] != PathPlainPD) {
			t.Errorf("%s: keeps %t", k, c.Keeps())
		}
	}
	if _, err := ParseDecoderKind("radix"); err == nil {
		t.Error("an unknown kind was accepted")
	}
	if c := (DecoderCaps{SessionCache: true, DecodeRadix: true, CondAgg: true}); c.Path() != PathExtension {
		t.Errorf("the extension with everything: %s", c.Path())
	}
}

// The router's own admission: direct only on local prefill, for a session
// pinned there, within τ_append of what the router believes the decoder
// holds; else a seed (or the extension's large-append refusal).
func TestRouterAdmit(t *testing.T) {
	a := Action{Kind: ActAdmit, D: 0, MaxAppend: 1000, Resident: 5000}
	for _, c := range []struct {
		name   string
		path   string
		pinned bool
		input  int
		edit   func(*Action)
		want   AdmitReply
	}{
		{"local, pinned, small append", PathLocalPrefill, true, 5800, nil, AdmitReply{CanAdmit: true, Direct: true}},
		{"local, pinned, large append", PathLocalPrefill, true, 6200, nil, AdmitReply{Reason: "real-large-append"}},
		{"local, nothing known resident", PathLocalPrefill, true, 6200, func(a *Action) { a.Resident = 0 }, AdmitReply{CanAdmit: true, Direct: true}},
		{"local, force seed", PathLocalPrefill, true, 5800, func(a *Action) { a.ForceSeed = true }, AdmitReply{CanAdmit: true, Reason: "session-not-resident"}},
		{"local, not pinned", PathLocalPrefill, false, 5800, nil, AdmitReply{CanAdmit: true, Reason: "session-not-resident"}},
		{"delta PD", PathDeltaPD, true, 5800, nil, AdmitReply{CanAdmit: true, Reason: "session-not-resident"}},
		{"plain PD", PathPlainPD, true, 5800, nil, AdmitReply{CanAdmit: true, Reason: "session-not-resident"}},
	} {
		x := a
		if c.edit != nil {
			c.edit(&x)
		}
		if got := RouterAdmit(c.path, c.pinned, c.input, x); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	if PathMode("pd-router-turn1-seed", PathPlainPD) != "pd-router-turn1-seed-via-plain-pd" || PathMode("m", PathExtension) != "m" || PathMode("m", "") != "m" {
		t.Error("PathMode labels")
	}
}

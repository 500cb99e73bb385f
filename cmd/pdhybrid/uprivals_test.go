package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// The 2026 rivals on the live stack: `up --mechanism pd-ppd` and
// `pd-deflect` start decoders with conditional aggregation and the decode
// radix cache (their local prefills are do_local_prefill requests),
// pd-deflect's slicing at its TBT SLO (--rival-tpot-slo-ms, serve's flag)
// and pd-ppd's not slicing, which /server_info reports; the gateway runs
// the mechanism: a first turn through an idle P answers in the rival's
// own PD mode (X-PDHybrid-Mode), which no other mechanism labels.
func TestUpRivals(t *testing.T) {
	for _, tc := range []struct {
		mech, mode string
		tpot       float64 // the decoder's tpot_slo_ms
	}{
		{"pd-ppd", kvc.ModePPDTurn1, 0},
		{"pd-deflect", kvc.ModeDeflectPD, 40},
	} {
		t.Run(tc.mech, func(t *testing.T) {
			gw, children, _, _, stderr := startUp(t, "--mechanism", tc.mech, "--decode", "1", "--port", "0", "--time-scale", "20",
				"--rival-tpot-slo-ms", "40")
			if len(children) != 2 {
				t.Fatalf("up named workers %v, want 2\n%s", children, stderr.String())
			}
			for _, u := range children {
				var info struct {
					CondAgg bool `json:"disaggregation_decode_enable_conditional_agg"`
					Radix   bool `json:"disaggregation_decode_enable_radix_cache"`
					Ext     struct {
						Role string  `json:"role"`
						TPOT float64 `json:"tpot_slo_ms"`
					} `json:"pdhybrid"`
				}
				resp, err := http.Get(u + "/server_info")
				if err != nil {
					t.Fatal(err)
				}
				err = json.NewDecoder(resp.Body).Decode(&info)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("%s/server_info: %v", u, err)
				}
				decode := info.Ext.Role == "decode"
				want := 0.0
				if decode {
					want = tc.tpot
				}
				if info.CondAgg != decode || info.Radix != decode || info.Ext.TPOT != want {
					t.Errorf("%s (%s): conditional agg %v, radix cache %v, tpot_slo_ms %v; want %v, %v, %v",
						u, info.Ext.Role, info.CondAgg, info.Radix, info.Ext.TPOT, decode, decode, want)
				}
			}
			if m, _ := post(t, gw, "s", seq(7000, 300)); m != tc.mode {
				t.Fatalf("turn 1 in mode %q, want %s\n%s", m, tc.mode, stderr.String())
			}
		})
	}
}

// up gives a rival's gateways its SLOs, PPD's weights and the workers'
// hardware for the cost model; a --gateway-arg comes last and wins.
func TestUpRivalServeArgs(t *testing.T) {
	f := upFlags{mech: "pd-ppd", hardware: "h100-80g", blockSize: 64, kvcPreset: "v3",
		rival: rivalFlags{ttftSLO: 500, tpotSLO: 40, ttftWeight: 2, tpotWeight: 1}, gatewayArgs: []string{"--policy=sticky"}}
	got := strings.Join(f.serveArgs([]string{"--decode", "http://d"}), " ")
	want := "serve --mechanism pd-ppd --block-size 64 --decode http://d --rival-ttft-slo-ms 500 --rival-tpot-slo-ms 40 --hardware h100-80g --ppd-ttft-weight 2 --ppd-tpot-weight 1 --policy=sticky"
	if got != want {
		t.Errorf("pd-ppd gateway args\n%s\nwant\n%s", got, want)
	}
	f.mech = "pd-deflect"
	args := f.serveArgs(nil)
	if slices.Contains(args, "--ppd-ttft-weight") || slices.Contains(args, "--kvc-preset") || !slices.Contains(args, "--rival-tpot-slo-ms") {
		t.Errorf("pd-deflect gateway args %v: want the SLOs, no PPD weights, no KVC preset", args)
	}
	if got := f.sliceArgs("decode"); !slices.Equal(got, []string{"--tpot-slo-ms", "40"}) {
		t.Errorf("pd-deflect decoder slicing %v, want --tpot-slo-ms 40", got)
	}
	if got := f.sliceArgs("prefill"); got != nil {
		t.Errorf("pd-deflect prefill slicing %v, want none", got)
	}
}

// A bad rival flag names the flag and its range, or the mechanism it
// belongs to, before anything starts.
func TestUpRivalFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mechanism", "pd-nope"}, "pd-ppd, pd-deflect"},
		{[]string{"--mechanism", "pd-ppd", "--rival-tpot-slo-ms", "0"}, "--rival-tpot-slo-ms 0: want milliseconds in (0, 10000000]"},
		{[]string{"--mechanism", "pd-deflect", "--rival-ttft-slo-ms", "-1"}, "--rival-ttft-slo-ms"},
		{[]string{"--mechanism", "pd-deflect", "--ppd-ttft-weight", "2"}, "--ppd-ttft-weight"},
		{[]string{"--rival-ttft-slo-ms", "100"}, "to --mechanism pd-ppd or pd-deflect"}, // kvcache-centric
		{[]string{"--mechanism", "pd-ppd", "--kvc-preset", "v4"}, "--kvc-preset"},
	} {
		_, se, err := runCLI(append([]string{"up"}, tc.args...)...)
		if err == nil || !strings.Contains(se, tc.want) {
			t.Errorf("up %v: err %v, stderr %q; want an error with %q", tc.args, err, se, tc.want)
		}
	}
}

package sim

import (
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// TestDecodeWorkerKinds: KVC on each decoder kind takes the path the
// gateway takes on a decoder of that kind (kvc.DecoderCaps.Path, shared;
// the gateway's side is TestCapabilityDiscovery and TestKVCOnEveryDecoderKind),
// named as the gateway names it: direct turns only where the decoder
// prefills them itself (the extension, or local prefill with its radix
// cache), and they find the session there; elsewhere every later turn is
// PD to the session's decoder.
func TestDecodeWorkerKinds(t *testing.T) {
	later := map[string]string{
		kvc.PathExtension:    "kvcache-direct-to-d-session",
		kvc.PathLocalPrefill: "kvcache-direct-to-d-session-via-local-prefill",
		kvc.PathDeltaPD:      "pd-router-d-session-reseed-via-delta-pd",
		kvc.PathPlainPD:      "pd-router-d-session-reseed-via-plain-pd",
	}
	for _, kind := range kvc.DecoderKinds {
		t.Run(kind, func(t *testing.T) {
			caps, _ := kvc.ParseDecoderKind(kind)
			path := caps.Path()
			cfg := kvcConfig(t)
			cfg.KVC.DecodeWorkerKind = kind
			sink := &memSink{}
			if _, err := runSource(t, cfg, smallAppend(t, 4, 4, 8192, 512), sink); err != nil {
				t.Fatal(err)
			}
			if len(sink.recs) != 16 {
				t.Fatalf("%d requests recorded, want 16", len(sink.recs))
			}
			for _, r := range sink.recs {
				want := kvc.PathMode("pd-router-turn1-seed", path)
				if r.Turn > 1 {
					want = later[path]
				}
				if r.Status != metrics.StatusCompleted || r.ExecutionMode != want {
					t.Fatalf("turn %d: %s in mode %s, want completed in %s (path %v)", r.Turn, r.Status, r.ExecutionMode, want, r.Path)
				}
				direct := path == kvc.PathExtension || path == kvc.PathLocalPrefill
				if r.Turn > 1 && direct && (r.PrefillWorker != "" || r.UncachedTokens > 512+256+64) {
					t.Fatalf("turn %d on %s: %d tokens prefilled on %q, want only the append on the decoder", r.Turn, path, r.UncachedTokens, r.PrefillWorker)
				}
				if r.Turn > 1 && !direct && r.PrefillWorker == "" {
					t.Fatalf("turn %d on %s: no prefill worker, want PD", r.Turn, path)
				}
			}
		})
	}
}

// One kind per decoder: each decoder takes its own path.
func TestDecodeWorkerKindPerDecoder(t *testing.T) {
	cfg := kvcConfig(t)
	cfg.KVC.DecodeWorkerKind = "extended,stock,decode-radix"
	sink := &memSink{}
	if _, err := runSource(t, cfg, smallAppend(t, 9, 3, 8192, 512), sink); err != nil {
		t.Fatal(err)
	}
	if len(sink.recs) != 27 {
		t.Fatalf("%d requests recorded, want 27", len(sink.recs))
	}
	want := map[string]string{"decode-0": "", "decode-1": "-via-plain-pd", "decode-2": "-via-delta-pd"}
	seen := map[string]bool{}
	for _, r := range sink.recs {
		suffix := ""
		if i := strings.Index(r.ExecutionMode, "-via-"); i >= 0 {
			suffix = r.ExecutionMode[i:]
		}
		if r.Status != metrics.StatusCompleted || suffix != want[r.DecodeWorker] {
			t.Fatalf("request %d on %s: %s in mode %s", r.ChatID, r.DecodeWorker, r.Status, r.ExecutionMode)
		}
		seen[r.DecodeWorker] = true
	}
	if len(seen) != 3 {
		t.Fatalf("decoders used: %v, want all three", seen)
	}
}

// Bad kinds are refused with what was expected.
func TestDecodeWorkerKindErrors(t *testing.T) {
	for spec, want := range map[string]string{
		"bogus":             `unknown decoder kind "bogus"`,
		"stock,stock":       "names 2 kinds for 3 decoders",
		"extended,,stock":   `unknown decoder kind ""`,
		"stock+d-to-p-sync": "needs the KVC extension's snapshot RPCs",
		"prefill:bogus":     `unknown prefill worker kind "bogus"`,
		"prefill:stock+dtp": "on the prefill workers",
	} {
		cfg := kvcConfig(t)
		cfg.KVC.DecodeWorkerKind = spec
		switch spec {
		case "stock+d-to-p-sync":
			cfg.KVC.DecodeWorkerKind, cfg.KVC.DToP = "stock", DToPPassive
		case "prefill:bogus":
			cfg.KVC.DecodeWorkerKind, cfg.KVC.PrefillWorkerKind = "", "bogus"
		case "prefill:stock+dtp":
			cfg.KVC.DecodeWorkerKind, cfg.KVC.PrefillWorkerKind, cfg.KVC.DToP = "", "stock", DToPPassive
		}
		cfg.Defaults()
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", spec, err, want)
		}
	}
}

// TestStockDecodersCreditedWithNothing: sessions sharing a system prompt
// on decoders that keep nothing (stock, conditional aggregation alone)
// spread over the decoders, each session staying on its own. The router
// used to believe such a decoder held every prompt it was sent, so the
// shared prompt drew every new session to the first decoder (all 1,279
// requests of the agentic workload on one of three, docs/gateway.md).
func TestStockDecodersCreditedWithNothing(t *testing.T) {
	for _, kind := range []string{kvc.KindStock, kvc.KindCondAgg} {
		t.Run(kind, func(t *testing.T) {
			cfg := kvcConfig(t)
			cfg.KVC.DecodeWorkerKind = kind
			recs := runSA(t, cfg, smallAppendCfg(12, 3, 8192, 512, 4096))
			if len(recs) != 36 {
				t.Fatalf("%d requests recorded, want 36", len(recs))
			}
			perD := map[string]int{}
			for _, r := range recs {
				if r.Status != metrics.StatusCompleted {
					t.Fatalf("request %d: %s %s", r.ChatID, r.Status, r.Error)
				}
				perD[r.DecodeWorker]++
			}
			if len(perD) != 3 {
				t.Fatalf("requests per decoder %v, want all three used", perD)
			}
			for d, n := range perD {
				if n < 36/3-6 {
					t.Errorf("requests per decoder %v: %s has %d", perD, d, n)
				}
			}
			if ch := dChanges(recs); len(ch) != 0 {
				t.Errorf("sessions changed decoder: %v (plain PD stays session-affine)", ch)
			}
		})
	}
}

// Package reporttest writes synthetic run directories for tests of the
// report package and the report command, so they do not depend on the
// simulator's output existing yet. The data is plausible rather than
// simulated: per-mechanism TTFT shapes that resemble the seed's figures
// (naive PD one slow mode; KVC a fast direct-to-D path plus fallbacks),
// sticky versus round-robin decode placement, a few failures with causes,
// and a worker occupancy time series.
package reporttest

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// Mechanisms that WriteRun knows how to fake.
const (
	NaivePD = "pd-disaggregation"
	KVC     = "kvcache-centric"
)

// Spec says what run to fake.
type Spec struct {
	Name      string // config.json "name"
	Mechanism string // NaivePD or KVC
	Sessions  int
	Seed      uint64
	// Summary and Config add (or replace) top-level fields of summary.json
	// and config.json, e.g. "model_id", "complete", "prefill".
	Summary, Config map[string]any
}

// WriteRun writes dir/{metrics.jsonl,summary.json,config.json,
// structural/workers.jsonl,structural/events.jsonl} for spec and returns the
// records it wrote.
func WriteRun(dir string, spec Spec) ([]metrics.Record, error) {
	if err := os.MkdirAll(filepath.Join(dir, "structural"), 0o755); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(spec.Seed, 0x5eed))
	recs, events := fakeRecords(rng, spec)
	col := metrics.NewCollector(metrics.SLO{TTFTS: 30})
	for i := range recs {
		col.Add(&recs[i])
	}
	sum := col.Summary(0)
	sum.Mechanism, sum.Policy = spec.Mechanism, "kv-aware"
	if err := writeJSONL(filepath.Join(dir, "metrics.jsonl"), len(recs), func(i int) any { return recs[i] }); err != nil {
		return nil, err
	}
	sumMap, err := withFields(sum, spec.Summary)
	if err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(dir, "summary.json"), sumMap); err != nil {
		return nil, err
	}
	cfg := map[string]any{"name": spec.Name, "mechanism": spec.Mechanism, "policy": "kv-aware", "seed": spec.Seed}
	for k, v := range spec.Config {
		cfg[k] = v
	}
	if err := writeJSON(filepath.Join(dir, "config.json"), cfg); err != nil {
		return nil, err
	}
	samples := fakeWorkers(rng, spec, sum.DurationS)
	if err := writeJSONL(filepath.Join(dir, "structural", "workers.jsonl"), len(samples), func(i int) any { return samples[i] }); err != nil {
		return nil, err
	}
	if err := writeJSONL(filepath.Join(dir, "structural", "events.jsonl"), len(events), func(i int) any { return events[i] }); err != nil {
		return nil, err
	}
	return recs, nil
}

func lognormal(rng *rand.Rand, median, sigma float64) float64 {
	return median * math.Exp(sigma*rng.NormFloat64())
}

func fakeRecords(rng *rand.Rand, spec Spec) ([]metrics.Record, []metrics.Event) {
	var recs []metrics.Record
	var events []metrics.Event
	const nD, nP = 4, 4
	rr := 0
	for s := 0; s < spec.Sessions; s++ {
		sid := fmt.Sprintf("s%04d", s)
		turns := 2 + rng.IntN(14)
		t := rng.Float64() * 600
		ctx := 4000 + rng.IntN(16000)
		pin := rng.IntN(nD)
		for turn := 1; turn <= turns; turn++ {
			appendTok := 300 + rng.IntN(4000)
			if turn > 1 {
				ctx += appendTok
			}
			out := 50 + rng.IntN(600)
			r := metrics.Record{
				RequestID: fmt.Sprintf("%s-t%d", sid, turn), SessionID: sid, ChatID: int64(s), Turn: turn,
				TraceTimeS: t, ArrivalS: t, InputLength: ctx, OutputLength: out,
				Status: metrics.StatusCompleted, FinishReason: "stop",
			}
			var ttft float64
			d := pin
			switch spec.Mechanism {
			case KVC:
				u := rng.Float64()
				switch {
				case turn == 1:
					r.ExecutionMode, ttft = "pd-router-turn1-seed", lognormal(rng, 8, 0.5)
					r.CachedTokens = 0
				case u < 0.40:
					r.ExecutionMode, ttft = "kvcache-direct-to-d-session", lognormal(rng, 0.2, 0.4)
					r.CachedTokens = ctx - appendTok
				case u < 0.70:
					r.ExecutionMode, ttft = "pd-router-fallback-real-large-append-session-cap", lognormal(rng, 55, 0.45)
					r.CachedTokens = (ctx - appendTok) / 2
				case u < 0.80:
					r.ExecutionMode, ttft = "pd-router-fallback-no-d-capacity", lognormal(rng, 110, 0.3)
					d = rng.IntN(nD)
				case u < 0.95:
					r.ExecutionMode, ttft = "pd-router-d-session-reseed", lognormal(rng, 40, 0.4)
					r.CachedTokens = (ctx - appendTok) / 3
					d = rng.IntN(nD)
				default:
					r.ExecutionMode, ttft = "pd-router-fallback-session-not-resident", lognormal(rng, 70, 0.3)
				}
				pin = d
				events = append(events, metrics.Event{TimeS: t, Kind: "admission", Worker: fmt.Sprintf("d%d", d), SessionID: sid, RequestID: r.RequestID, Detail: r.ExecutionMode})
			default:
				r.ExecutionMode, ttft = "pd-disaggregation-router", lognormal(rng, 75, 0.35)
				r.CachedTokens = int(float64(ctx-appendTok) * rng.Float64() * 0.5)
				d = rr % nD
				rr++
			}
			if turn == 1 {
				r.CachedTokens = 0
			}
			r.UncachedTokens = ctx - r.CachedTokens
			if r.ExecutionMode != "kvcache-direct-to-d-session" {
				r.PrefillWorker = fmt.Sprintf("p%d", rng.IntN(nP))
			}
			r.DecodeWorker = fmt.Sprintf("d%d", d)
			tpot := lognormal(rng, 0.02, 0.2)
			r.TTFTS, r.TPOTS = ttft, tpot
			r.LatencyS = ttft + tpot*float64(out-1)
			r.Breakdown = metrics.Breakdown{QueueS: ttft * 0.6, PrefillS: ttft * 0.35, TransferS: ttft * 0.05, DecodeS: r.LatencyS - ttft}
			if f := rng.Float64(); f < 0.03 {
				r.Status, r.Error, r.FinishReason = metrics.StatusFailed, "no-space", "abort"
				if f < 0.01 {
					r.Status, r.Error = metrics.StatusTimeout, "request timeout"
				}
			}
			recs = append(recs, r)
			t += r.LatencyS + rng.ExpFloat64()*20
		}
	}
	return recs, events
}

func fakeWorkers(rng *rand.Rand, spec Spec, duration float64) []metrics.WorkerSample {
	var out []metrics.WorkerSample
	const capTok = 400000
	type w struct {
		name, role string
		occ        float64
	}
	ws := []w{{"p0", "prefill", 0.2}, {"p1", "prefill", 0.2}, {"d0", "decode", 0.3}, {"d1", "decode", 0.3}, {"d2", "decode", 0.3}, {"d3", "decode", 0.3}}
	target := 0.45
	if spec.Mechanism == KVC {
		target = 0.8
	}
	for t := 0.0; t <= duration; t += 5 {
		for i := range ws {
			x := &ws[i]
			x.occ += 0.1*(target-x.occ) + 0.05*rng.NormFloat64()
			x.occ = math.Min(math.Max(x.occ, 0), 1)
			used := int64(x.occ * capTok)
			out = append(out, metrics.WorkerSample{TimeS: t, Worker: x.name, Role: x.role, KVUsedTokens: used,
				KVCachedTokens: used / 3, KVCapacityTokens: capTok, Running: rng.IntN(8), Queued: rng.IntN(4)})
		}
	}
	return out
}

// withFields returns v's JSON object with extra's fields set on top.
func withFields(v any, extra map[string]any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, x := range extra {
		m[k] = x
	}
	return m, nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func writeJSONL(path string, n int, at func(int) any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for i := 0; i < n; i++ {
		if err := enc.Encode(at(i)); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

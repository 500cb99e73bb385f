// Package fidelity replays a real serving run (internal/trace/realrun) in
// the simulator and compares what it predicts with what the server did:
// per run, TTFT and end-to-end latency mean, p50, p90 and p99 over the
// requests that completed, the failure count, and the relative error of
// each (docs/fidelity.md).
package fidelity

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/model"
	"github.com/pdhybrid/pdhybrid/internal/sim"
	"github.com/pdhybrid/pdhybrid/internal/trace"
	"github.com/pdhybrid/pdhybrid/internal/trace/realrun"
)

// Stats summarise one latency over the completed requests.
type Stats struct {
	Mean, P50, P90, P99 float64
	N                   int
}

// Of computes Stats of xs (NaNs skipped); percentiles by nearest rank.
func Of(xs []float64) Stats {
	v := make([]float64, 0, len(xs))
	var sum float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
			sum += x
		}
	}
	if len(v) == 0 {
		return Stats{Mean: math.NaN(), P50: math.NaN(), P90: math.NaN(), P99: math.NaN()}
	}
	sort.Float64s(v)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(v)))) - 1
		return v[min(max(i, 0), len(v)-1)]
	}
	return Stats{Mean: sum / float64(len(v)), P50: q(0.5), P90: q(0.9), P99: q(0.99), N: len(v)}
}

// Side is one side of the comparison.
type Side struct {
	TTFT, E2E Stats
	Failed    int
	// DecodeS is the mean per-token decode time (e2e − ttft)/(output − 1).
	DecodeS float64
}

// OverloadTTFTS marks a run overloaded: requests failed (the client's
// timeout) or queued so long that the mean TTFT exceeds this. All four
// reasoning runs are (README: most requests fail or time out; CodeLlama's
// lost only 4, after a 120 s mean TTFT); the other twelve have mean TTFTs
// of 27–103 ms.
const OverloadTTFTS = 10

// Result compares one run.
type Result struct {
	Run        string
	Overloaded bool // the real run queued without bound (OverloadTTFTS)
	Real, Sim  Side
	PoolTokens int64 // the simulated worker's KV pool
	RealPool   int64 // kv_blocks_total_gpu · block_size
	SimWallS   float64
	// Requests pairs each request's real and simulated latencies, in the
	// run's order (Options.KeepRequests).
	Requests []Pair
}

// Pair is one request of a run, real beside simulated (NaN where it
// failed): what an attribution of a tail (queueing, cold prefill, the
// server's own stalls) starts from.
type Pair struct {
	Index                  int
	ArrivalS               float64
	Input                  int
	RealTTFT, RealE2E      float64
	SimTTFT, SimE2E        float64
	SimCached, SimUncached int
}

// Err is the relative error (sim − real) / real.
func Err(sim, real float64) float64 {
	if real == 0 || math.IsNaN(real) || math.IsNaN(sim) {
		return math.NaN()
	}
	return (sim - real) / real
}

// Options set the replay up.
type Options struct {
	// TimeoutS is the client's per-request timeout (inference-perf's 300 s
	// in the sixteen runs: every failed request ended at 300–301 s).
	TimeoutS float64
	Convert  realrun.Options
	// Client is the serving path outside the engine model.
	Client ClientPath
	// KeepRequests fills Result.Requests.
	KeepRequests bool
}

// ClientPath is what a streamed token crosses after the engine step that
// made it and before the client sees it: vLLM V1's engine core hands each
// step's output to the API server's output processor (detokenisation, the
// SSE stream) while it runs the next steps, so a token reaches the client
// about StepsLate steps after its own plus a constant DelayS (HTTP,
// tokenisation). Both are fitted to the real runs (`pdhybrid calibrate
// realruns`); they shift TTFT and end-to-end latency alike.
type ClientPath struct {
	DelayS    float64 `json:"delay_s"`
	StepsLate float64 `json:"steps_late"`
}

// DefaultClientPath is the fit on the sixteen H100 runs (docs/fidelity.md).
var DefaultClientPath = ClientPath{DelayS: 5.533e-3, StepsLate: 1.5}

// DefaultTimeoutS is the realruns client's timeout.
const DefaultTimeoutS = 300

// Compare replays run r on profile p (one colocated worker, the profile's
// scheduler) and compares.
func Compare(ctx context.Context, r *realrun.Run, p *model.Profile, o Options) (*Result, error) {
	if o.TimeoutS == 0 {
		o.TimeoutS = DefaultTimeoutS
	}
	h, reqs := r.Trace(o.Convert)
	cfg := sim.Config{
		Name: r.Name, Mechanism: sim.PDColo, Colo: 1, Profile: p,
		TimeoutS: o.TimeoutS, MaxBacklog: -1, MaxInputLen: r.Meta.ExpConfig.MaxModelLen,
	}
	if s := p.Server; s != nil {
		cfg.ChunkTokens, cfg.MaxRunning = s.ChunkedPrefillSize, s.MaxRunningRequests
	}
	if r.Meta.Server.MaxBatchedTokens > 0 {
		cfg.ChunkTokens = r.Meta.Server.MaxBatchedTokens
	}
	if r.Meta.Server.MaxNumSeqs > 0 {
		cfg.MaxRunning = r.Meta.Server.MaxNumSeqs
	}
	if cfg.MaxInputLen > p.Model.MaxContext || cfg.MaxInputLen == 0 {
		cfg.MaxInputLen = p.Model.MaxContext
	}
	sink := &collect{byChat: make(map[int64]*metrics.Record, len(reqs))}
	res, err := sim.Run(ctx, cfg, &source{h: h, reqs: reqs}, sink, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.Name, err)
	}
	out := &Result{Run: r.Name, RealPool: r.Meta.Server.KVBlocks * int64(r.Meta.Server.BlockSize)}
	for _, w := range res.Workers {
		out.PoolTokens = w.PoolTokens
	}
	out.Real = realSide(r)
	out.Sim = simSide(sink, o.Client)
	out.Overloaded = out.Real.Failed > 0 || out.Real.TTFT.Mean > OverloadTTFTS
	if o.KeepRequests {
		out.Requests = pairs(r, sink, o.Client)
	}
	return out, nil
}

func pairs(r *realrun.Run, c *collect, cp ClientPath) []Pair {
	out := make([]Pair, 0, len(r.Requests))
	for _, q := range r.Requests {
		p := Pair{Index: q.Index, ArrivalS: q.ArrivalS, Input: q.InputTokens, RealTTFT: q.TTFTS, RealE2E: q.E2ES,
			SimTTFT: math.NaN(), SimE2E: math.NaN()}
		if s := c.byChat[int64(q.Index)]; s != nil {
			p.SimCached, p.SimUncached = s.CachedTokens, s.UncachedTokens
			if s.Status == metrics.StatusCompleted {
				late := cp.DelayS
				if s.OutputLength > 1 {
					late += cp.StepsLate * (s.LatencyS - s.TTFTS) / float64(s.OutputLength-1)
				}
				p.SimTTFT, p.SimE2E = s.TTFTS+late, s.LatencyS+late
			}
		}
		out = append(out, p)
	}
	return out
}

// WritePairs writes a run's requests as CSV.
func WritePairs(w io.Writer, ps []Pair) error {
	var b strings.Builder
	b.WriteString("index,arrival_s,input_tokens,real_ttft_s,real_e2e_s,sim_ttft_s,sim_e2e_s,sim_cached_tokens,sim_uncached_tokens\n")
	f := func(x float64) string {
		if math.IsNaN(x) {
			return ""
		}
		return fmt.Sprintf("%.6f", x)
	}
	for _, p := range ps {
		fmt.Fprintf(&b, "%d,%.6f,%d,%s,%s,%s,%s,%d,%d\n", p.Index, p.ArrivalS, p.Input, f(p.RealTTFT), f(p.RealE2E), f(p.SimTTFT), f(p.SimE2E), p.SimCached, p.SimUncached)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func realSide(r *realrun.Run) Side {
	var ttft, e2e, dec []float64
	var s Side
	out := r.Meta.Client.Data.SharedPrefix.OutputLen
	for _, q := range r.Requests {
		if !q.OK {
			s.Failed++
			continue
		}
		ttft, e2e = append(ttft, q.TTFTS), append(e2e, q.E2ES)
		if out > 1 {
			dec = append(dec, (q.E2ES-q.TTFTS)/float64(out-1))
		}
	}
	s.TTFT, s.E2E, s.DecodeS = Of(ttft), Of(e2e), Of(dec).Mean
	return s
}

func simSide(c *collect, cp ClientPath) Side {
	var ttft, e2e, dec []float64
	var s Side
	for _, r := range c.byChat {
		if r.Status != metrics.StatusCompleted {
			s.Failed++
			continue
		}
		var gap float64
		if r.OutputLength > 1 {
			gap = (r.LatencyS - r.TTFTS) / float64(r.OutputLength-1)
			dec = append(dec, gap)
		}
		late := cp.DelayS + cp.StepsLate*gap
		ttft, e2e = append(ttft, r.TTFTS+late), append(e2e, r.LatencyS+late)
	}
	s.TTFT, s.E2E, s.DecodeS = Of(ttft), Of(e2e), Of(dec).Mean
	return s
}

type source struct {
	h    trace.Header
	reqs []trace.Request
	i    int
}

func (s *source) Header() trace.Header { return s.h }
func (s *source) Next(r *trace.Request) error {
	if s.i >= len(s.reqs) {
		return io.EOF
	}
	*r = s.reqs[s.i]
	s.i++
	return nil
}

type collect struct{ byChat map[int64]*metrics.Record }

func (c *collect) Request(r *metrics.Record) error {
	cp := *r
	cp.Path = nil
	c.byChat[r.ChatID] = &cp
	return nil
}
func (c *collect) Worker(*metrics.WorkerSample) error { return nil }
func (c *collect) Event(*metrics.Event) error         { return nil }

// Deployment is the served setup a run's meta.json states: vLLM on H100
// SXM GPUs at its tensor parallelism, batch limits and context length.
func Deployment(r *realrun.Run) (model.Deployment, error) {
	g, err := model.LookupGPU("h100-sxm")
	if err != nil {
		return model.Deployment{}, err
	}
	s := r.Meta.Server
	return model.Deployment{GPU: g, TP: s.TP, Engine: "vllm", MemFraction: 0.9,
		MaxBatchedTokens: s.MaxBatchedTokens, MaxSeqs: s.MaxNumSeqs, MaxModelLen: r.Meta.ExpConfig.MaxModelLen}, nil
}

// ConfigFile is the run's model config within a realruns folder
// (model_configs/<model id's last part>.json).
func ConfigFile(dir string, r *realrun.Run) string {
	id := r.Meta.ModelID
	return dir + "/model_configs/" + id[strings.LastIndex(id, "/")+1:] + ".json"
}

package calibrate

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/pdhybrid/pdhybrid/internal/fidelity"
	"github.com/pdhybrid/pdhybrid/internal/model"
	"github.com/pdhybrid/pdhybrid/internal/trace/realrun"
)

// RealRun is one real serving run with the model it served.
type RealRun struct {
	Run  *realrun.Run
	Arch *model.Arch
}

// LoadRealRuns reads every run of a realruns folder (runs/*.csv with their
// meta.json, model_configs/*.json), in name order.
func LoadRealRuns(dir string) ([]RealRun, error) {
	files, err := filepath.Glob(filepath.Join(dir, "runs", "*.csv"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no runs/*.csv", dir)
	}
	sort.Strings(files)
	var out []RealRun
	for _, f := range files {
		r, err := realrun.Load(f)
		if err != nil {
			return nil, err
		}
		a, err := model.LoadHF(fidelity.ConfigFile(dir, r))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Name, err)
		}
		out = append(out, RealRun{Run: r, Arch: a})
	}
	return out, nil
}

// SplitRealRuns parts runs into those to fit and those held out: a run is
// held out when its name contains any of holdOut (a cross-validation split,
// e.g. one model's four runs).
func SplitRealRuns(runs []RealRun, holdOut []string) (fit, held []RealRun) {
	for _, r := range runs {
		out := false
		for _, h := range holdOut {
			if h != "" && strings.Contains(r.Run.Name, h) {
				out = true
			}
		}
		if out {
			held = append(held, r)
		} else {
			fit = append(fit, r)
		}
	}
	return fit, held
}

// EvalRealRuns replays every run with the coefficients, jobs at a time.
func EvalRealRuns(ctx context.Context, runs []RealRun, c model.Coefficients, cp fidelity.ClientPath, jobs int) ([]*fidelity.Result, error) {
	return EvalRealRunsWith(ctx, runs, c, cp, jobs, fidelity.Options{})
}

// EvalRealRunsWith is EvalRealRuns with the replay's options (the client
// path in o is replaced by cp).
func EvalRealRunsWith(ctx context.Context, runs []RealRun, c model.Coefficients, cp fidelity.ClientPath, jobs int, o fidelity.Options) ([]*fidelity.Result, error) {
	o.Client = cp
	out := make([]*fidelity.Result, len(runs))
	errs := make([]error, len(runs))
	sem := make(chan struct{}, max(jobs, 1))
	var wg sync.WaitGroup
	for i, rr := range runs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			d, err := fidelity.Deployment(rr.Run)
			if err == nil {
				var p *model.Profile
				if p, err = d.Profile(rr.Arch, c, rr.Run.Meta.Server.BlockSize); err == nil {
					out[i], err = fidelity.Compare(ctx, rr.Run, p, o)
				}
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Score is the fit's objective: over the runs that were not overloaded,
// the mean of |error| of e2e and TTFT means (weight 1 each), p90s (weight
// ½ each) and TTFT p99 (weight ½: the first pass over a run's prompts, its
// cold prefills, makes it, and nothing else pins the GEMM efficiency of a
// prefill of hundreds of tokens); an overloaded run adds the error of its
// mean decode time per token (its batches are full: max_num_seqs binds)
// and ¼ of its failure-count error.
func Score(res []*fidelity.Result) float64 {
	var s, n float64
	ab := func(sim, real float64) float64 {
		e := math.Abs(fidelity.Err(sim, real))
		if math.IsNaN(e) {
			return 10
		}
		return min(e, 10)
	}
	for _, r := range res {
		if r.Overloaded {
			s += ab(r.Sim.DecodeS, r.Real.DecodeS) + 0.25*ab(float64(r.Sim.Failed), float64(r.Real.Failed))
			n += 1.25
			continue
		}
		s += ab(r.Sim.E2E.Mean, r.Real.E2E.Mean) + ab(r.Sim.TTFT.Mean, r.Real.TTFT.Mean) +
			0.5*ab(r.Sim.E2E.P90, r.Real.E2E.P90) + 0.5*ab(r.Sim.TTFT.P90, r.Real.TTFT.P90) +
			0.5*ab(r.Sim.TTFT.P99, r.Real.TTFT.P99)
		n += 3.5
	}
	return s / n
}

// knob is one fitted coefficient: a pointer into the candidate and its bounds.
type knob struct {
	name   string
	get    func(*model.Coefficients, *fidelity.ClientPath) *float64
	lo, hi float64
}

var knobs = []knob{
	{"bw_eff", func(c *model.Coefficients, _ *fidelity.ClientPath) *float64 { return &c.BWEff }, 0.3, 1},
	{"expert_bw_eff", func(c *model.Coefficients, _ *fidelity.ClientPath) *float64 { return &c.ExpertBWEff }, 0.1, 1},
	{"kv_bw_eff", func(c *model.Coefficients, _ *fidelity.ClientPath) *float64 { return &c.KVBWEff }, 0.1, 1},
	{"kv_bw_eff_large", func(c *model.Coefficients, _ *fidelity.ClientPath) *float64 { return &c.KVBWEffLarge }, 0.1, 1},
	{"attn_cta_share", func(c *model.Coefficients, _ *fidelity.ClientPath) *float64 { return &c.AttnCTAShare }, 1.0 / 528, 1},
	{"step_s", func(c *model.Coefficients, _ *fidelity.ClientPath) *float64 { return &c.StepS }, 1e-5, 0.02},
	{"layer_s", func(c *model.Coefficients, _ *fidelity.ClientPath) *float64 { return &c.LayerS }, 1e-7, 5e-4},
	{"per_seq_s", func(c *model.Coefficients, _ *fidelity.ClientPath) *float64 { return &c.PerSeqS }, 1e-7, 1e-3},
	{"collective_s", func(c *model.Coefficients, _ *fidelity.ClientPath) *float64 { return &c.CollectiveS }, 1e-7, 1e-4},
	{"gemm_eff", func(c *model.Coefficients, _ *fidelity.ClientPath) *float64 { return &c.GEMMEff }, 0.1, 1},
	{"prefill_weight_read", func(c *model.Coefficients, _ *fidelity.ClientPath) *float64 { return &c.PrefillWeightRead }, 0.01, 1},
	{"attn_eff", func(c *model.Coefficients, _ *fidelity.ClientPath) *float64 { return &c.AttnEff }, 0.05, 1},
	{"link_eff", func(c *model.Coefficients, _ *fidelity.ClientPath) *float64 { return &c.LinkEff }, 0.05, 1},
	{"client.delay_s", func(_ *model.Coefficients, p *fidelity.ClientPath) *float64 { return &p.DelayS }, 1e-4, 0.1},
	{"client.steps_late", func(_ *model.Coefficients, p *fidelity.ClientPath) *float64 { return &p.StepsLate }, 0.01, 5},
}

// RealRunsFit is a fit's result.
type RealRunsFit struct {
	Coefficients model.Coefficients
	Client       fidelity.ClientPath
	Score        float64
	Results      []*fidelity.Result
	Evals        int
}

// KnobNames are the coefficients FitRealRuns can tune, in its order.
func KnobNames() []string {
	out := make([]string, len(knobs))
	for i, k := range knobs {
		out[i] = k.name
	}
	return out
}

// FitRealRuns tunes the coefficients to the real runs (Score over every
// run replayed); only, when not empty, names the knobs to tune (the rest
// stay as given); progress, when set, hears each kept change.
func FitRealRuns(ctx context.Context, runs []RealRun, c model.Coefficients, cp fidelity.ClientPath, jobs, rounds int, only []string, progress func(string)) (*RealRunsFit, error) {
	ks, err := pickKnobs(only)
	if err != nil {
		return nil, err
	}
	fit := &RealRunsFit{}
	eval := func(c model.Coefficients, cp fidelity.ClientPath) (float64, error) {
		res, err := EvalRealRuns(ctx, runs, c, cp, jobs)
		if err != nil {
			return 0, err
		}
		s := Score(res)
		if fit.Results == nil || s < fit.Score {
			fit.Score, fit.Results = s, res
		}
		return s, nil
	}
	fit.Coefficients, fit.Client, fit.Evals, err = search(c, cp, ks, rounds, eval, progress)
	return fit, err
}

func pickKnobs(only []string) ([]knob, error) {
	if len(only) == 0 {
		return knobs, nil
	}
	var out []knob
	for _, n := range only {
		found := false
		for _, k := range knobs {
			if k.name == n {
				out, found = append(out, k), true
			}
		}
		if !found {
			return nil, fmt.Errorf("no coefficient %q (have %s)", n, strings.Join(KnobNames(), ", "))
		}
	}
	return out, nil
}

// search tunes the knobs by coordinate search in log space: each knob in
// turn is multiplied and divided by a step factor, a change kept when it
// lowers the score; a sweep without a change shrinks the factor, down to
// 1.02, or rounds sweeps are done.
func search(c model.Coefficients, cp fidelity.ClientPath, ks []knob, rounds int, eval func(model.Coefficients, fidelity.ClientPath) (float64, error), progress func(string)) (model.Coefficients, fidelity.ClientPath, int, error) {
	best, err := eval(c, cp)
	if err != nil {
		return c, cp, 1, err
	}
	evals := 1
	f := 1.5
	for round := 0; round < rounds && f > 1.02; round++ {
		improved := false
		for _, k := range ks {
			for _, m := range []float64{f, 1 / f} {
				cc, pp := c, cp
				v := k.get(&cc, &pp)
				*v = math.Min(math.Max(*v*m, k.lo), k.hi)
				if *v == *k.get(&c, &cp) {
					continue
				}
				s, err := eval(cc, pp)
				evals++
				if err != nil {
					return c, cp, evals, err
				}
				if s < best-1e-5 {
					c, cp, best = cc, pp, s
					improved = true
					if progress != nil {
						progress(fmt.Sprintf("round %d: %s = %.4g, score %.4f", round+1, k.name, *v, s))
					}
					break
				}
			}
		}
		if !improved {
			f = math.Sqrt(f)
		}
	}
	return c, cp, evals, nil
}

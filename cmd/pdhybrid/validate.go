package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pdhybrid/pdhybrid/internal/calibrate"
	"github.com/pdhybrid/pdhybrid/internal/fidelity"
	"github.com/pdhybrid/pdhybrid/internal/model"
)

// defaultRealRuns is the realruns folder beside a checkout.
const defaultRealRuns = "../shared/realruns"

// realRunFlags are the flags validate and calibrate realruns share.
type realRunFlags struct {
	data, coeffs string
	jobs         int
}

func (f *realRunFlags) register(c *cobra.Command) {
	fs := c.Flags()
	fs.StringVar(&f.data, "data", defaultRealRuns, "realruns `folder` (runs/*.csv with their meta.json, model_configs/*.json)")
	fs.StringVar(&f.coeffs, "coefficients", "", "fitted coefficients JSON `file` from calibrate realruns (default: the built-in fit, docs/fidelity.md)")
	fs.IntVar(&f.jobs, "jobs", 2, "`runs` replayed at once, in [1, 256]")
}

func (f *realRunFlags) load(c *cobra.Command) ([]calibrate.RealRun, model.Coefficients, fidelity.ClientPath, error) {
	ck := newChecks(c)
	ck.num("jobs", between(1, 256).is("a number of runs"))
	if err := ck.err(); err != nil {
		return nil, model.Coefficients{}, fidelity.ClientPath{}, err
	}
	co, cp := model.DefaultCoefficients, fidelity.DefaultClientPath
	if f.coeffs != "" {
		x, err := fidelity.LoadFitted(f.coeffs)
		if err != nil {
			return nil, co, cp, usagef("--coefficients: %v", err)
		}
		co, cp = x.Coefficients, x.Client
	}
	if _, err := os.Stat(f.data); err != nil {
		return nil, co, cp, usagef("--data %s: %v", f.data, err)
	}
	runs, err := calibrate.LoadRealRuns(f.data)
	return runs, co, cp, err
}

func validateRunsCmd(e *env) *cobra.Command {
	var f realRunFlags
	var markdown bool
	c := &cobra.Command{
		Use:   "validate [flags]",
		Short: "replay real serving runs in the simulator and print real vs simulated TTFT and e2e",
		Long: `Replay every real run of a realruns folder (one vLLM server per run, driven by
the inference-perf client) in the simulator: the model from the run's Hugging
Face config.json on H100 SXM GPUs at the run's tensor parallelism, vLLM's
scheduler and KV pool formula, the run's arrivals and lengths as a trace
(pdhybrid trace convert --from realrun). Print per run the real and simulated
TTFT and end-to-end latency (mean, p50, p90, p99 in seconds, over the requests
that completed) with their relative errors, the failed requests (the client's
300 s timeout), and the KV pool vLLM logged beside the one modelled; then the
median absolute error per statistic over the runs that were not overloaded.
docs/fidelity.md holds the committed table.`,
		Args: noArgs,
	}
	f.register(c)
	c.Flags().BoolVar(&markdown, "markdown", false, "print the table as Markdown (docs/fidelity.md)")
	var reqDir string
	c.Flags().StringVar(&reqDir, "requests", "", "also write each run's requests, real beside simulated, as `folder`/<run>.csv (an existing folder)")
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, _ []string) error {
		if reqDir != "" {
			if st, err := os.Stat(reqDir); err != nil || !st.IsDir() {
				return usagef("--requests %s: not an existing folder", reqDir)
			}
		}
		runs, co, cp, err := f.load(c)
		if err != nil {
			return err
		}
		res, err := calibrate.EvalRealRunsWith(ctx, runs, co, cp, f.jobs, fidelity.Options{KeepRequests: reqDir != ""})
		if err != nil {
			return err
		}
		for _, r := range res {
			if reqDir == "" {
				break
			}
			var b strings.Builder
			if err := fidelity.WritePairs(&b, r.Requests); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(reqDir, r.Run+".csv"), []byte(b.String()), 0o644); err != nil {
				return err
			}
		}
		return fidelity.WriteTable(e.stdout, res, markdown)
	})
	return c
}

func calibrateRealRunsCmd(e *env) *cobra.Command {
	var f realRunFlags
	var out string
	var rounds int
	var force bool
	c := &cobra.Command{
		Use:   "realruns [flags]",
		Short: "fit the roofline's efficiency and overhead coefficients to real serving runs",
		Long: `Fit the roofline step-time model's coefficients (GEMM, attention, HBM and link
efficiency, step, per-sequence and collective overheads, the client path's
delay) to the real runs of a realruns folder by coordinate search, each
candidate scored by replaying every run (pdhybrid validate's comparison): the
mean |error| of e2e and TTFT means and p90s over the runs that were not
overloaded, and the failure counts of the overloaded ones. Writes the fit as
JSON to --out (validate --coefficients reads it) and prints the table.`,
		Args: noArgs,
	}
	f.register(c)
	fs := c.Flags()
	fs.StringVar(&out, "out", "realruns-fit.json", "fitted coefficients JSON `file` to write")
	fs.IntVar(&rounds, "rounds", 8, "coordinate-search `sweeps` over the coefficients, in [0, 100]")
	fs.BoolVar(&force, "force", false, "replace --out if it exists")
	var holdOut, only []string
	fs.StringSliceVar(&only, "only", nil, "tune only these `coefficients` (comma-separated; default all: "+strings.Join(calibrate.KnobNames(), ", ")+"); the rest stay as --coefficients gives them")
	fs.StringSliceVar(&holdOut, "hold-out", nil, "runs whose name contains this `text` (repeat or comma-separate) are left out of the fit, then replayed with the fitted coefficients and printed apart: a cross-validation split, e.g. one model's runs (docs/fidelity.md)")
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, _ []string) error {
		ck := newChecks(c)
		ck.num("rounds", between(0, 100).is("a number of sweeps"))
		if err := ck.err(); err != nil {
			return err
		}
		if _, err := os.Stat(out); err == nil && !force {
			return usagef("--out %s: exists; pass --force to replace it, or give another file", out)
		}
		runs, co, cp, err := f.load(c)
		if err != nil {
			return err
		}
		fitOn, held := calibrate.SplitRealRuns(runs, holdOut)
		if len(fitOn) == 0 {
			return usagef("--hold-out %s: every run matches; nothing is left to fit", strings.Join(holdOut, ","))
		}
		if len(holdOut) > 0 && len(held) == 0 {
			return usagef("--hold-out %s: no run's name contains it", strings.Join(holdOut, ","))
		}
		if len(held) > 0 && !anyMoE(fitOn) {
			// Nothing left to fit says how a MoE layer's expert reads
			// go: predict the held-out MoE runs from the HBM efficiency.
			co.ExpertBWEff = 0
		}
		fit, err := calibrate.FitRealRuns(ctx, fitOn, co, cp, f.jobs, rounds, only, func(s string) { fmt.Fprintln(e.stderr, s) })
		if err != nil {
			if strings.HasPrefix(err.Error(), "no coefficient") {
				return usagef("--only: %v", err)
			}
			return err
		}
		b, err := json.MarshalIndent(fidelity.Fitted{Coefficients: fit.Coefficients, Client: fit.Client, Score: fit.Score,
			Source: fmt.Sprintf("pdhybrid calibrate realruns --data %s: %d runs, %d evaluations%s", f.data, len(fitOn), fit.Evals, heldNote(holdOut))}, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "wrote %s (score %.4f after %d evaluations)\n\n", out, fit.Score, fit.Evals)
		if err := fidelity.WriteTable(e.stdout, fit.Results, false); err != nil || len(held) == 0 {
			return err
		}
		res, err := calibrate.EvalRealRuns(ctx, held, fit.Coefficients, fit.Client, f.jobs)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "\nheld out of the fit (%s):\n", strings.Join(holdOut, ","))
		return fidelity.WriteTable(e.stdout, res, false)
	})
	return c
}

// anyMoE reports whether a run serves a mixture-of-experts model.
func anyMoE(runs []calibrate.RealRun) bool {
	for _, r := range runs {
		if r.Arch.Experts > 0 {
			return true
		}
	}
	return false
}

// heldNote names the held-out runs in a fit's source line.
func heldNote(holdOut []string) string {
	if len(holdOut) == 0 {
		return ""
	}
	return " (held out: runs named " + strings.Join(holdOut, ", ") + ")"
}

func calibrateRooflineCmd(e *env) *cobra.Command {
	var data, cfg, hw string
	var hold, rounds int
	c := &cobra.Command{
		Use:   "roofline [flags]",
		Short: "fit the roofline's GPU-time coefficients to one GPU's step measurements; print held-out errors",
		Long: `Fit the roofline step-time model's GPU-time coefficients (GEMM, attention and
HBM efficiency, the prefill weight-read share, step and per-sequence costs) for
the model of --model-config on --hardware to measurements taken on that GPU
(calibration/measure.py), by coordinate search on the fitted points' mean
prefill and decode-step MAPE, and print the coefficients and the error table
with the held-out points apart (docs/calibration.md).` + "\n" + calibrateAbout,
		Args: noArgs,
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.StringVar(&data, "data", defaultCalibrationData, "measurement `folder`")
	fs.StringVar(&cfg, "model-config", "calibration/qwen3-30b-a3b.config.json", "Hugging Face config.json `file` of the measured model")
	fs.StringVar(&hw, "hardware", "h200", "datasheet `GPU` the measurements come from ("+strings.Join(model.GPUNames(), ", ")+")")
	fs.IntVar(&hold, "holdout", calibrate.DefaultHoldout, "held-out split `k`, as for fit, in [1, 1000000]")
	fs.IntVar(&rounds, "rounds", 30, "coordinate-search `sweeps`, in [1, 1000]")
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, _ []string) error {
		ck := newChecks(c)
		ck.num("holdout", between(1, 1e6).is("a divisor"))
		ck.num("rounds", between(1, 1000).is("a number of sweeps"))
		if err := ck.err(); err != nil {
			return err
		}
		d, err := calibrate.Load(data)
		if err != nil {
			return err
		}
		a, err := model.LoadHF(cfg)
		if err != nil {
			return usagef("--model-config: %v", err)
		}
		g, err := model.LookupGPU(hw)
		if err != nil {
			return usagef("--hardware: %v", err)
		}
		f, err := calibrate.FitRoofline(d, a, model.Deployment{GPU: g, TP: 1}, model.DefaultCoefficients, hold, rounds)
		if err != nil {
			return err
		}
		co := f.Coefficients
		fmt.Fprintf(e.stdout, "roofline for %s on %s fitted to %s (%d evaluations): GEMM efficiency %.3f, attention %.3f, HBM %.3f (KV reads %.3f), prefill weight-read share %.3f, step %.3f ms, per-sequence %.2f us\n\n",
			a.Name, g.Name, data, f.Evals, co.GEMMEff, co.AttnEff, co.BWEff, co.KVBWEff, co.PrefillWeightRead, co.StepS*1e3, co.PerSeqS*1e6)
		return calibrate.WriteErrors(e.stdout, f.Errors)
	})
	return c
}

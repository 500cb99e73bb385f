package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pdhybrid/pdhybrid/internal/calibrate"
	"github.com/pdhybrid/pdhybrid/internal/model"
)

func calibrateCmd(e *env) *cobra.Command {
	return group("calibrate", "fit engine-model timing coefficients to GPU measurements",
		`Fit the engine model's timing coefficients and copy links to measurements
taken on a GPU (calibration/measure.py), or check a profile against them.
docs/calibration.md describes the method and the committed results.`,
		calibrateFitCmd(e), calibrateCheckCmd(e), calibrateRealRunsCmd(e), calibrateRooflineCmd(e))
}

// defaultCalibrationData is the folder the committed h200 profile was fitted
// to: prefill measured with cuDNN SDPA, decode and copies from the earlier
// FlashAttention-2 run (calibration/data), copied unchanged (docs/calibration.md).
const defaultCalibrationData = "calibration/data/triton"

const calibrateAbout = `
Measurements come from calibration/measure.py on a GPU (docs/calibration.md):
prefill.csv, decode.csv and copy.csv in one folder, one row per point, times in
seconds for the whole 48-layer model. A point is held out of the fit when the
FNV-1a hash of its key ("prefill n=4096 p=8192", "decode b=16 c=65536", ...)
is divisible by --holdout; the fit never sees those points and the table reports
the mean absolute percentage error (MAPE) on them apart from the fitted ones.`

// defaultFitOut is where calibrate fit writes unless told: a new file in
// the working directory, never the committed profile.
const defaultFitOut = "calibrated-profile.json"

func calibrateFitCmd(e *env) *cobra.Command {
	var data, out, base string
	var hold int
	var force bool
	c := &cobra.Command{
		Use:   "fit [flags]",
		Short: "fit timing coefficients and links to measurements; write the profile and print held-out errors",
		Long: `Fit the engine model's timing coefficients (non-negative least squares on
relative error) and the copy links to GPU measurements, write the profile with
its sources to --out, and print the error table. An existing --out file is
refused unless --force (to refit the committed profile:
--out internal/model/profiles/qwen3-30b-a3b_h200-141g.json --force).` + "\n" + calibrateAbout,
		Args: noArgs,
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.StringVar(&data, "data", defaultCalibrationData, "measurement `folder` (prefill.csv, decode.csv, copy.csv, meta.json)")
	fs.StringVar(&out, "out", defaultFitOut, "profile JSON `file` to write")
	fs.BoolVar(&force, "force", false, "replace --out if it exists")
	fs.StringVar(&base, "base", "", "profile JSON `file` whose model, hardware, links and sources are kept (default: the built-in qwen3-30b-a3b/h200-141g)")
	fs.IntVar(&hold, "holdout", calibrate.DefaultHoldout, "hold out a point when its key's hash is divisible by this `k`, in [1, 1000000] (1 = fit on everything)")
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, _ []string) error {
		ck := newChecks(c)
		ck.num("holdout", between(1, 1e6).is("a divisor"))
		if out == "" {
			ck.fail("--out \"\": give the profile file to write")
		}
		if err := ck.err(); err != nil {
			return err
		}
		if st, err := os.Stat(out); err == nil {
			if st.IsDir() {
				return usagef("--out %s: is a folder; give a file name", out)
			}
			if !force {
				return usagef("--out %s: exists; pass --force to replace it, or give another file", out)
			}
		}
		d, err := calibrate.Load(data)
		if err != nil {
			return err
		}
		prof, err := fitBase(base)
		if err != nil {
			return err
		}
		f, err := calibrate.FitData(d, prof.Model, hold)
		if err != nil {
			return err
		}
		applyFit(prof, d, f, hold)
		if err := prof.Validate(); err != nil {
			return err
		}
		if err := writeProfile(prof, out); err != nil {
			return err
		}
		// The table is for the profile as written (coefficients rounded to 4 digits).
		errs := calibrate.Evaluate(d, prof, hold)
		fmt.Fprintf(e.stdout, "wrote %s from %s (%d prefill, %d decode, %d copy points; held out: hash %% %d == 0)\n\n",
			out, data, len(d.Prefill), len(d.Decode), len(d.Copy), hold)
		printTiming(e, prof)
		fmt.Fprintln(e.stdout)
		return calibrate.WriteErrors(e.stdout, errs)
	})
	return c
}

func calibrateCheckCmd(e *env) *cobra.Command {
	var data, profile, modelName, hw string
	var hold int
	var maxMAPE float64
	c := &cobra.Command{
		Use:   "check [flags]",
		Short: "print a profile's errors against measurements, fitted and held-out points apart",
		Long: `Print how far a profile's timing and links are from GPU measurements, on the
fitted and the held-out points apart; fail when prefill or decode-step
held-out MAPE exceeds --max-mape.` + "\n" + calibrateAbout,
		Args: noArgs,
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.StringVar(&data, "data", defaultCalibrationData, "measurement `folder`")
	fs.StringVar(&profile, "profile", "", "profile JSON `file` (default: the built-in --model/--hardware)")
	fs.StringVar(&modelName, "model", "qwen3-30b-a3b", "built-in model `name`")
	fs.StringVar(&hw, "hardware", "h200-141g", "built-in hardware `name`")
	fs.IntVar(&hold, "holdout", calibrate.DefaultHoldout, "held-out split `k`, as for fit, in [1, 1000000]")
	fs.Float64Var(&maxMAPE, "max-mape", 10, "fail when prefill or decode-step held-out MAPE exceeds this many `percent`; 0 = never fail")
	c.RunE = runE(func(ctx context.Context, c *cobra.Command, _ []string) error {
		ck := newChecks(c)
		ck.num("holdout", between(1, 1e6).is("a divisor"))
		ck.num("max-mape", above(0).upTo(1e6).orZero("never fail").is("a percentage"))
		if ck.set("profile") {
			ck.only("model", false, "without --profile")
			ck.only("hardware", false, "without --profile")
		}
		if err := ck.err(); err != nil {
			return err
		}
		d, err := calibrate.Load(data)
		if err != nil {
			return err
		}
		var prof *model.Profile
		if profile != "" {
			prof, err = model.Load(profile)
		} else {
			prof, err = model.Builtin(modelName, hw)
		}
		if err != nil {
			return err
		}
		errs := calibrate.Evaluate(d, prof, hold)
		fmt.Fprintf(e.stdout, "profile %s against %s (held out: hash %% %d == 0)\n\n", prof.Name, data, hold)
		if err := calibrate.WriteErrors(e.stdout, errs); err != nil {
			return err
		}
		if maxMAPE > 0 {
			for _, x := range errs {
				if (x.Op == "prefill" || x.Op == "decode step") && x.Test > 0 && 100*x.TestMAPE > maxMAPE {
					return fmt.Errorf("%s held-out MAPE %.1f%% exceeds %.1f%%", x.Op, 100*x.TestMAPE, maxMAPE)
				}
			}
		}
		return nil
	})
	return c
}

// fitBase picks the profile whose non-timing parts the fit keeps.
func fitBase(base string) (*model.Profile, error) {
	if base != "" {
		return model.Load(base)
	}
	return model.Builtin("qwen3-30b-a3b", "h200-141g")
}

// sig rounds v to 4 significant digits, so profiles read as measured numbers
// rather than as solver output.
func sig(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 4, 64), 64)
	return f
}

// applyFit writes the fitted coefficients, links, measured memory and the
// sources that say where each came from into p.
func applyFit(p *model.Profile, d *calibrate.Data, f *calibrate.Fit, hold int) {
	t := f.Timing
	eager, neager := calibrate.EagerPrefillS(d)
	p.Timing = model.Timing{
		PrefillOverheadS:   sig(t.PrefillOverheadS),
		PrefillEagerS:      sig(eager),
		PrefillPerTokenS:   sig(t.PrefillPerTokenS),
		PrefillAttnS:       sig(t.PrefillAttnS),
		DecodeOverheadS:    sig(t.DecodeOverheadS),
		DecodePerSeqS:      sig(t.DecodePerSeqS),
		DecodePerCtxTokenS: sig(t.DecodePerCtxTokenS),
		DecodeExpertsS:     sig(t.DecodeExpertsS),

		DecodePerCtxTokenLargeS: sig(t.DecodePerCtxTokenLargeS),
		LargeBatch:              t.LargeBatch,
	}
	if p.Links == nil {
		p.Links = map[string]model.Link{}
	}
	if p.Sources == nil {
		p.Sources = map[string]string{}
	}
	run := describeRun(d)
	for name, l := range f.Links {
		p.Links[name] = model.Link{Name: name, SetupS: sig(l.SetupS), BandwidthBytes: sig(l.BandwidthBytes)}
	}
	if total, ok := metaNumber(d, "mem_get_info_total"); ok && total > 0 {
		p.Hardware.HBMBytes = int64(total)
		p.Sources["hardware.hbm_bytes"] = fmt.Sprintf("measured: torch.cuda.mem_get_info() total on %s (%s); nvidia-smi shows 143,771 MiB, of which CUDA exposes this much", run, d.Dir)
	}
	mape := map[string]float64{}
	for _, x := range calibrate.Evaluate(d, p, hold) {
		mape[x.Op] = x.TestMAPE
	}
	fitted := fmt.Sprintf("fitted by `pdhybrid calibrate fit` to %s (%s)", d.Dir, run)
	pm := fmt.Sprintf("; prefill held-out MAPE %.1f%%", 100*mape["prefill"])
	dm := fmt.Sprintf("; decode-step held-out MAPE %.1f%%", 100*mape["decode step"])
	p.Sources["timing"] = "calibrated on a real H200 (docs/calibration.md): " + fitted +
		"; non-negative least squares on relative error over 2/3 of the grid, error stated on the other third"
	p.Sources["timing.prefill_overhead_s"] = "fixed cost of a prefill step, mostly reading all 128 experts' weights once: " + fitted + pm
	delete(p.Sources, "timing.prefill_eager_s")
	if neager > 0 {
		p.Sources["timing.prefill_eager_s"] = fmt.Sprintf("SGLang runs prefill and mixed (extend) batches eagerly, decode from CUDA graphs: the median of eager minus CUDA-graph time over the %d points of %s/prefill.csv measured both ways. It includes some of the harness's own Python launches, which SGLang's fused extend does not pay, so it may overcharge a little (docs/calibration.md, Eager prefill)", neager, d.Dir)
	}
	p.Sources["timing.prefill_per_token_s"] = "GEMM work per new token (Triton fused MoE + projections): " + fitted + pm
	p.Sources["timing.prefill_attn_s"] = prefillAttnKernel(d) + " per query-key pair n·(p+n/2): " + fitted + pm
	p.Sources["timing.decode_overhead_s"] = "CUDA-graph decode step with no context: non-expert weights, lm_head, launch: " + fitted + dm
	p.Sources["timing.decode_per_seq_s"] = "per-sequence cost of a decode step: " + fitted + dm
	p.Sources["timing.decode_per_ctx_token_s"] = fmt.Sprintf("KV read per context token per step, batches below %d: ", calibrate.LargeBatch) + fitted + dm
	if t.LargeBatch > 0 {
		p.Sources["timing.decode_per_ctx_token_large_batch_s"] = fmt.Sprintf("KV read per context token per step, batches of %d or more (the measured attention reads context at its own rate there): ", t.LargeBatch) + fitted + dm
	}
	p.Sources["timing.decode_experts_s"] = "reading every expert once, scaled by 1-(1-8/128)^B: " + fitted + dm
	for kind, name := range calibrate.LinkForCopy {
		l, ok := f.Links[name]
		if !ok {
			continue
		}
		what := "device-to-device copy within one H200 (tensor.copy_, cudaMemcpy): no second GPU involved"
		if kind == "p2p_0to1" {
			what = "GPU 0 to GPU 1 copy over NVLink (NV18) between two H200s of one host (tensor.copy_, peer access on)"
		}
		p.Sources["links."+name] = fmt.Sprintf("measured: %s, setup %.1f us + bytes / %.0f GB/s; %s; held-out MAPE %.1f%%",
			what, 1e6*sig(l.SetupS), sig(l.BandwidthBytes)/1e9, fitted, 100*mape["copy "+kind+" ("+name+")"])
	}
}

// prefillAttnKernel names the prefill attention kernel that produced d's
// prefill points, from meta.json (runs before --attn-prefill used FlashAttention-2).
func prefillAttnKernel(d *calibrate.Data) string {
	kernel := ""
	if c, ok := d.Meta["checks"].(map[string]any); ok {
		kernel, _ = c["prefill_attn_kernel"].(string)
	}
	switch {
	case strings.HasPrefix(kernel, "cudnn_split"):
		return "cuDNN SDPA (the prefix and the new tokens as two calls, merged by log-sum-exp)"
	case strings.HasPrefix(kernel, "cudnn"):
		return "cuDNN SDPA"
	default:
		return "FlashAttention-2"
	}
}

// describeRun says which device and software produced d, from meta.json.
func describeRun(d *calibrate.Data) string {
	s := func(k string) string {
		if v, ok := d.Meta[k]; ok {
			return fmt.Sprint(v)
		}
		return "?"
	}
	date := "?"
	if v, ok := metaNumber(d, "started_unix"); ok {
		date = time.Unix(int64(v), 0).UTC().Format("2006-01-02")
	}
	return fmt.Sprintf("%s, torch %s, CUDA %s, measured %s", s("device_name"), s("torch"), s("cuda"), date)
}

func metaNumber(d *calibrate.Data, key string) (float64, bool) {
	v, ok := d.Meta[key].(float64)
	return v, ok
}

// writeProfile writes p to path through a temporary file.
func writeProfile(p *model.Profile, path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".profile-*.json")
	if err != nil {
		return err
	}
	enc := json.NewEncoder(tmp)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // keep "->" and "<" readable in sources
	if err := enc.Encode(p); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func printTiming(e *env, p *model.Profile) {
	t := p.Timing
	fmt.Fprintf(e.stdout, "prefill  = %.4g s + %.4g s eager + %.4g s/token·n + %.4g s/pair·n·(p+n/2)\n",
		t.PrefillOverheadS, t.PrefillEagerS, t.PrefillPerTokenS, t.PrefillAttnS)
	fmt.Fprintf(e.stdout, "decode   = %.4g s + %.4g s/seq·B + %.4g s/token·C + %.4g s·(1-(1-%d/%d)^B)\n",
		t.DecodeOverheadS, t.DecodePerSeqS, t.DecodePerCtxTokenS, t.DecodeExpertsS, p.Model.TopK, p.Model.Experts)
	if t.LargeBatch > 0 {
		fmt.Fprintf(e.stdout, "           (batches of %d or more: %.4g s/token·C)\n", t.LargeBatch, t.DecodePerCtxTokenLargeS)
	}
	for _, name := range []string{"d2d-h200", "nvlink"} {
		if l, ok := p.Links[name]; ok {
			fmt.Fprintf(e.stdout, "link %-8s = %.4g s + bytes / %.4g B/s\n", name, l.SetupS, l.BandwidthBytes)
		}
	}
}

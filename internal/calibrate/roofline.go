package calibrate

import (
	"github.com/pdhybrid/pdhybrid/internal/fidelity"
	"github.com/pdhybrid/pdhybrid/internal/model"
)

// gpuKnobs are the coefficients a GPU-time measurement identifies: no
// scheduler, client path or collectives (TP1).
var gpuKnobs = func() []knob {
	var out []knob
	for _, k := range knobs {
		switch k.name {
		case "gemm_eff", "attn_eff", "bw_eff", "kv_bw_eff", "expert_bw_eff", "prefill_weight_read", "step_s", "layer_s", "per_seq_s":
			out = append(out, k)
		}
	}
	return out
}()

// RooflineFit is the roofline fitted to a GPU's step measurements.
type RooflineFit struct {
	Coefficients model.Coefficients
	Profile      *model.Profile
	Errors       []OpError
	Evals        int
}

// FitRoofline tunes the roofline's coefficients for arch on d to the
// measurements of one GPU (calibration/), minimising the mean of the
// prefill and decode-step MAPE over the fitted points only; Errors gives
// the held-out split apart, as for the linear fit.
func FitRoofline(data *Data, a *model.Arch, d model.Deployment, c model.Coefficients, k, rounds int) (*RooflineFit, error) {
	fit := &RooflineFit{}
	eval := func(c model.Coefficients, _ fidelity.ClientPath) (float64, error) {
		p, err := d.Profile(a, c, 16)
		if err != nil {
			return 0, err
		}
		var s float64
		for _, e := range Evaluate(data, p, k) {
			if e.Op == "prefill" || e.Op == "decode step" {
				s += e.TrainMAPE / 2
			}
		}
		return s, nil
	}
	var err error
	fit.Coefficients, _, fit.Evals, err = search(c, fidelity.ClientPath{}, gpuKnobs, rounds, eval, nil)
	if err != nil {
		return nil, err
	}
	if fit.Profile, err = d.Profile(a, fit.Coefficients, 16); err != nil {
		return nil, err
	}
	fit.Errors = Evaluate(data, fit.Profile, k)
	return fit, nil
}

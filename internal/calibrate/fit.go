package calibrate

import (
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/pdhybrid/pdhybrid/internal/model"
)

// DefaultHoldout is the split used by the CLI and the docs: a point is held
// out when the FNV-1a hash of its key is divisible by 3 (about a third).
const DefaultHoldout = 3

// Holdout reports whether the point named key is held out of the fit: the
// FNV-1a hash of key modulo k is zero. It depends on the key alone, so the
// split does not change when points are added, removed or reordered.
func Holdout(key string, k int) bool {
	if k <= 1 {
		return false
	}
	h := fnv.New32a()
	io.WriteString(h, key)
	return h.Sum32()%uint32(k) == 0
}

// Key names a measured point for the held-out split.
func (p PrefillPoint) Key() string {
	return "prefill n=" + strconv.Itoa(p.N) + " p=" + strconv.Itoa(p.P)
}

// Key names a measured point for the held-out split.
func (d DecodePoint) Key() string {
	return "decode b=" + strconv.Itoa(d.Batch) + " c=" + strconv.FormatInt(d.Ctx, 10)
}

// Key names a measured point for the held-out split.
func (c CopyPoint) Key() string {
	return "copy " + c.Kind + " bytes=" + strconv.FormatInt(c.Bytes, 10) + " chunks=" + strconv.Itoa(c.Chunks)
}

// PrefillFeatures is the prefill design row: the coefficients it multiplies
// are (PrefillOverheadS, PrefillPerTokenS, PrefillAttnS).
func PrefillFeatures(n, p int) []float64 {
	fn := float64(n)
	return []float64{1, fn, fn * (float64(p) + fn/2)}
}

// LargeBatch is where the decode context slope is fitted apart: batches of
// this many sequences or more read context at their own measured rate.
const LargeBatch = 64

// DecodeFeatures is the decode design row: the coefficients it multiplies
// are (DecodeOverheadS, DecodePerSeqS, DecodePerCtxTokenS, DecodeExpertsS,
// DecodePerCtxTokenLargeS); the two context columns split at LargeBatch.
func DecodeFeatures(m model.Model, batch int, ctx int64) []float64 {
	small, large := float64(ctx), 0.0
	if batch >= LargeBatch {
		small, large = 0, float64(ctx)
	}
	return []float64{1, float64(batch), small, m.ExpertFraction(batch), large}
}

// CopyFeatures is a link's design row: (SetupS, 1/BandwidthBytes).
func CopyFeatures(bytes int64) []float64 { return []float64{1, float64(bytes)} }

// LinkForCopy names the profile link a copy kind calibrates.
var LinkForCopy = map[string]string{
	"d2d":      "d2d-h200",
	"p2p_0to1": "nvlink",
}

// FitRelative fits non-negative coefficients x minimising Σ ((A·x − y)/y)²,
// the squared relative error, by NNLS on rows scaled by 1/y.
func FitRelative(A [][]float64, y []float64) ([]float64, error) {
	As := make([][]float64, len(A))
	b := make([]float64, len(A))
	for i := range A {
		if !(y[i] > 0) {
			return nil, fmt.Errorf("observation %d: time %v, expected > 0", i, y[i])
		}
		As[i] = make([]float64, len(A[i]))
		for j := range A[i] {
			As[i][j] = A[i][j] / y[i]
		}
		b[i] = 1
	}
	return NNLS(As, b)
}

// OpError is the model's error on one operation's measurements.
type OpError struct {
	Op          string
	Train, Test int     // points in each part
	TrainMAPE   float64 // mean |model − measured| / measured over the fitted points
	TestMAPE    float64 // the same over the held-out points
	TestMaxAPE  float64 // the worst held-out point
	WorstTest   string  // its key
}

// Fit is the outcome of fitting one run.
type Fit struct {
	Timing model.Timing
	// Links holds the fitted links, keyed by profile link name.
	Links  map[string]model.Link
	Errors []OpError
}

// FitData fits the engine model's timing and the copy links to d on the
// points that Holdout(key, k) keeps in, then measures the error on both parts.
func FitData(d *Data, m model.Model, k int) (*Fit, error) {
	f := &Fit{Links: map[string]model.Link{}}
	if len(d.Prefill) > 0 {
		var A [][]float64
		var y []float64
		for _, p := range d.Prefill {
			if !Holdout(p.Key(), k) {
				A = append(A, PrefillFeatures(p.N, p.P))
				y = append(y, p.Seconds)
			}
		}
		x, err := FitRelative(A, y)
		if err != nil {
			return nil, fmt.Errorf("prefill: %w", err)
		}
		f.Timing.PrefillOverheadS, f.Timing.PrefillPerTokenS, f.Timing.PrefillAttnS = x[0], x[1], x[2]
	}
	if len(d.Decode) > 0 {
		var A [][]float64
		var y []float64
		for _, p := range d.Decode {
			if !Holdout(p.Key(), k) {
				A = append(A, DecodeFeatures(m, p.Batch, p.Ctx))
				y = append(y, p.Seconds)
			}
		}
		x, err := FitRelative(A, y)
		if err != nil {
			return nil, fmt.Errorf("decode: %w", err)
		}
		f.Timing.DecodeOverheadS, f.Timing.DecodePerSeqS = x[0], x[1]
		f.Timing.DecodePerCtxTokenS, f.Timing.DecodeExpertsS = x[2], x[3]
		if x[4] > 0 {
			f.Timing.DecodePerCtxTokenLargeS, f.Timing.LargeBatch = x[4], LargeBatch
		}
	}
	for _, kind := range copyKinds(d) {
		var A [][]float64
		var y []float64
		for _, c := range d.Copy {
			if c.Kind == kind && c.Chunks == 1 && !Holdout(c.Key(), k) {
				A = append(A, CopyFeatures(c.Bytes))
				y = append(y, c.Seconds)
			}
		}
		x, err := FitRelative(A, y)
		if err != nil {
			return nil, fmt.Errorf("copy %s: %w", kind, err)
		}
		if !(x[1] > 0) {
			return nil, fmt.Errorf("copy %s: no bandwidth term fitted", kind)
		}
		name := LinkForCopy[kind]
		f.Links[name] = model.Link{Name: name, SetupS: x[0], BandwidthBytes: 1 / x[1]}
	}
	p := &model.Profile{Model: m, Timing: f.Timing, Links: f.Links}
	f.Errors = Evaluate(d, p, k)
	return f, nil
}

// copyKinds lists the copy kinds in d that map to a link, sorted.
func copyKinds(d *Data) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range d.Copy {
		if _, ok := LinkForCopy[c.Kind]; ok && c.Chunks == 1 && !seen[c.Kind] {
			seen[c.Kind] = true
			out = append(out, c.Kind)
		}
	}
	sort.Strings(out)
	return out
}

// Evaluate measures profile p's error on d with the same split as FitData:
// prefill with Timing.PrefillS (against the eager times where the profile
// charges eager prefill), decode steps with Timing.DecodeStepS, and
// single copies with the link LinkForCopy names (skipped if p lacks it).
func Evaluate(d *Data, p *model.Profile, k int) []OpError {
	var out []OpError
	add := func(op string, keys []string, pred, meas []float64) {
		if len(keys) == 0 {
			return
		}
		e := OpError{Op: op}
		var trSum, teSum float64
		for i, key := range keys {
			ape := math.Abs(pred[i]-meas[i]) / meas[i]
			if Holdout(key, k) {
				e.Test++
				teSum += ape
				if ape > e.TestMaxAPE {
					e.TestMaxAPE, e.WorstTest = ape, key
				}
			} else {
				e.Train++
				trSum += ape
			}
		}
		if e.Train > 0 {
			e.TrainMAPE = trSum / float64(e.Train)
		}
		if e.Test > 0 {
			e.TestMAPE = teSum / float64(e.Test)
		}
		out = append(out, e)
	}
	var keys []string
	var pred, meas []float64
	for _, q := range d.Prefill {
		keys = append(keys, q.Key())
		pred = append(pred, p.Timing.PrefillS(q.N, q.P))
		// A profile that charges eager prefill is held to the eager
		// measurement where there is one (the graph time elsewhere: steps
		// of 50 ms or more, where eager is within 4 % of it).
		if p.Timing.PrefillEagerS > 0 && q.Eager > 0 {
			meas = append(meas, q.Eager)
		} else {
			meas = append(meas, q.Seconds)
		}
	}
	add("prefill", keys, pred, meas)
	keys, pred, meas = nil, nil, nil
	for _, q := range d.Decode {
		keys = append(keys, q.Key())
		pred = append(pred, p.Timing.DecodeStepS(p.Model, q.Batch, q.Ctx))
		meas = append(meas, q.Seconds)
	}
	add("decode step", keys, pred, meas)
	for _, kind := range copyKinds(d) {
		l, ok := p.Links[LinkForCopy[kind]]
		if !ok {
			continue
		}
		keys, pred, meas = nil, nil, nil
		for _, c := range d.Copy {
			if c.Kind == kind && c.Chunks == 1 {
				keys = append(keys, c.Key())
				pred = append(pred, l.TransferS(c.Bytes))
				meas = append(meas, c.Seconds)
			}
		}
		add("copy "+kind+" ("+l.Name+")", keys, pred, meas)
	}
	return out
}

// WriteErrors prints an error table.
func WriteErrors(w io.Writer, errs []OpError) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "operation\tfit pts\tfit MAPE\theld-out pts\theld-out MAPE\theld-out max\tworst held-out point")
	for _, e := range errs {
		fmt.Fprintf(tw, "%s\t%d\t%.1f%%\t%d\t%.1f%%\t%.1f%%\t%s\n", e.Op, e.Train, 100*e.TrainMAPE,
			e.Test, 100*e.TestMAPE, 100*e.TestMaxAPE, e.WorstTest)
	}
	return tw.Flush()
}

package synth

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// Knot is one quantile of a distribution: P(X <= V) = P.
type Knot struct{ P, V float64 }

// QuantileDist is a positive distribution given by a few of its quantiles,
// as the seed reports them ("p10 1.6 s, p50 2.5 s, p90 7.8 s"). It passes
// exactly through every knot and is lognormal in between: log V is linear in
// the standard normal score z = Φ⁻¹(P). Beyond the outer knots it extends the
// outer segments' slopes, then clamps to [Min, Max]. One knot pair is a
// lognormal (see LogNormal).
type QuantileDist struct {
	// Knots in increasing P (strictly inside (0,1)) and non-decreasing V > 0.
	Knots []Knot
	// Min and Max clamp a draw; Max 0 means no upper clamp.
	Min, Max float64
}

// LogNormal is the lognormal with the given median and shape σ (the
// standard deviation of its logarithm), clamped to [min, max].
func LogNormal(median, sigma, min, max float64) QuantileDist {
	return QuantileDist{
		Knots: []Knot{{0.5, median}, {normalCDF(1), median * math.Exp(sigma)}},
		Min:   min, Max: max,
	}
}

// Validate reports the first inconsistency.
func (d *QuantileDist) Validate() error {
	if len(d.Knots) < 2 {
		return errors.New("need at least two quantile knots")
	}
	for i, k := range d.Knots {
		if !(k.P > 0 && k.P < 1) || !(k.V > 0) || math.IsInf(k.V, 0) {
			return fmt.Errorf("knot %d (p=%v, v=%v): want 0 < p < 1 and a finite v > 0", i, k.P, k.V)
		}
		if i > 0 && (k.P <= d.Knots[i-1].P || k.V < d.Knots[i-1].V) {
			return fmt.Errorf("knot %d: p must increase and v must not decrease", i)
		}
	}
	last := d.Knots[len(d.Knots)-1]
	if d.Min < 0 || d.Max < 0 || (d.Max > 0 && d.Max < d.Min) || d.Min > last.V || (d.Max > 0 && d.Max < d.Knots[0].V) {
		return errors.New("clamp [min, max] must be ordered and must not cut off the knots")
	}
	return nil
}

// qdist is a QuantileDist compiled for drawing: knot scores and logs.
type qdist struct {
	z, l     []float64
	min, max float64
}

func (d *QuantileDist) compile() *qdist {
	q := &qdist{min: d.Min, max: d.Max}
	for _, k := range d.Knots {
		q.z = append(q.z, probit(k.P))
		q.l = append(q.l, math.Log(k.V))
	}
	return q
}

// atZ is the value at normal score z.
func (q *qdist) atZ(z float64) float64 {
	// Segment i joins knots i and i+1; the outer segments extend past the ends.
	i := 0
	for i < len(q.z)-2 && z > q.z[i+1] {
		i++
	}
	v := math.Exp(q.l[i] + (q.l[i+1]-q.l[i])*(z-q.z[i])/(q.z[i+1]-q.z[i]))
	v = max(v, q.min)
	if q.max > 0 {
		v = min(v, q.max)
	}
	return v
}

// draw samples the distribution.
func (q *qdist) draw(r *rand.Rand) float64 { return q.atZ(r.NormFloat64()) }

// Quantile is the inverse CDF at p in (0,1).
func (d *QuantileDist) Quantile(p float64) float64 { return d.compile().atZ(probit(p)) }

// Mean integrates the quantile function numerically (midpoint rule on a
// uniform grid of 200,000 points in p); for tests and docs, not for draws.
func (d *QuantileDist) Mean() float64 {
	const n = 200000
	q := d.compile()
	s := 0.0
	for i := range n {
		s += q.atZ(probit((float64(i) + 0.5) / n))
	}
	return s / n
}

// probit is Φ⁻¹, the standard normal quantile function.
func probit(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }

package synth

import (
	"math"
	"math/rand/v2"
)

// quantileGrid is the probability grid of every embedded empirical table: the
// body in 5% steps, with the tails resolved finer because the weka
// distributions are heavy-tailed (a few huge appends, pauses of up to a day). Read-only.
var quantileGrid = [...]float64{
	0, 0.01, 0.02, 0.05, 0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50,
	0.55, 0.60, 0.65, 0.70, 0.75, 0.80, 0.85, 0.90, 0.925, 0.95, 0.975, 0.99,
	0.995, 0.999, 1,
}

// quantiles is an empirical distribution: its values at quantileGrid. An
// inverse-CDF draw interpolates linearly between grid points, which
// reproduces the measured quantiles exactly and needs no parametric
// assumption about the shape (the first-turn sizes are bimodal, which a
// lognormal would miss).
type quantiles [len(quantileGrid)]float64

// at is the inverse CDF at u in [0,1].
func (q *quantiles) at(u float64) float64 {
	if u <= 0 {
		return q[0]
	}
	if u >= 1 {
		return q[len(q)-1]
	}
	// Binary search for the grid cell holding u.
	lo, hi := 0, len(quantileGrid)-1
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if quantileGrid[mid] <= u {
			lo = mid
		} else {
			hi = mid
		}
	}
	f := (u - quantileGrid[lo]) / (quantileGrid[hi] - quantileGrid[lo])
	return q[lo] + (q[hi]-q[lo])*f
}

// draw samples the distribution.
func (q *quantiles) draw(r *rand.Rand) float64 { return q.at(r.Float64()) }

// normalCDF is Φ, the standard normal distribution function.
func normalCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// gaussianCopulaRho converts a Spearman rank correlation into the correlation
// of a Gaussian copula with that rank correlation (Pearson's relation
// ρ = 2·sin(π·ρ_s/6)).
func gaussianCopulaRho(spearman float64) float64 {
	return 2 * math.Sin(math.Pi*spearman/6)
}

// correlatedUniforms returns two uniforms whose Gaussian copula has
// correlation rho: the way first-turn size and session length are drawn
// jointly, since in the data sessions that start big are shorter.
func correlatedUniforms(r *rand.Rand, rho float64) (u1, u2 float64) {
	z1 := r.NormFloat64()
	z2 := rho*z1 + math.Sqrt(1-rho*rho)*r.NormFloat64()
	return normalCDF(z1), normalCDF(z2)
}

// roundMS rounds seconds to milliseconds: keeps trace lines short and the
// values exactly reproducible through decimal JSON.
func roundMS(s float64) float64 { return math.Round(s*1000) / 1000 }

// splitmix64 scrambles a counter into a well-mixed 64-bit value; used to
// derive independent PCG streams for each session from one seed.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

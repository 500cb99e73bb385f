package calibrate

import (
	"errors"
	"math"
)

// NNLS solves min ‖A·x − b‖₂ subject to x ≥ 0 by the active-set method of
// Lawson and Hanson (1974). A has one row per observation. Columns are
// scaled to unit norm internally so coefficients of very different
// magnitudes (seconds per step and seconds per token pair) are treated alike.
func NNLS(A [][]float64, b []float64) ([]float64, error) {
	m := len(A)
	if m == 0 || m != len(b) {
		return nil, errors.New("nnls: empty system or row count mismatch")
	}
	n := len(A[0])
	for _, r := range A {
		if len(r) != n {
			return nil, errors.New("nnls: ragged matrix")
		}
	}
	scale := make([]float64, n)
	for j := 0; j < n; j++ {
		s := 0.0
		for i := 0; i < m; i++ {
			s += A[i][j] * A[i][j]
		}
		scale[j] = math.Sqrt(s)
		if scale[j] == 0 {
			scale[j] = 1
		}
	}
	As := make([][]float64, m)
	for i := range A {
		As[i] = make([]float64, n)
		for j := range A[i] {
			As[i][j] = A[i][j] / scale[j]
		}
	}
	x := make([]float64, n)
	passive := make([]bool, n)
	const tol = 1e-12
	grad := func() []float64 {
		r := residual(As, x, b)
		w := make([]float64, n)
		for j := 0; j < n; j++ {
			for i := 0; i < m; i++ {
				w[j] += As[i][j] * r[i]
			}
		}
		return w
	}
	for iter := 0; iter < 30*n+30; iter++ {
		w := grad()
		jmax, wmax := -1, tol
		for j := 0; j < n; j++ {
			if !passive[j] && w[j] > wmax {
				jmax, wmax = j, w[j]
			}
		}
		if jmax < 0 {
			break
		}
		passive[jmax] = true
		for inner := 0; inner < 30*n+30; inner++ {
			z, err := lsqSubset(As, b, passive)
			if err != nil {
				return nil, err
			}
			allPos := true
			for j := 0; j < n; j++ {
				if passive[j] && z[j] <= tol {
					allPos = false
				}
			}
			if allPos {
				copy(x, z)
				break
			}
			alpha := math.Inf(1)
			for j := 0; j < n; j++ {
				if passive[j] && z[j] <= tol {
					if a := x[j] / (x[j] - z[j]); a < alpha {
						alpha = a
					}
				}
			}
			for j := 0; j < n; j++ {
				x[j] += alpha * (z[j] - x[j])
				if passive[j] && x[j] <= tol {
					passive[j] = false
					x[j] = 0
				}
			}
		}
	}
	for j := range x {
		x[j] /= scale[j]
	}
	return x, nil
}

func residual(A [][]float64, x, b []float64) []float64 {
	r := make([]float64, len(b))
	for i := range A {
		s := b[i]
		for j, a := range A[i] {
			s -= a * x[j]
		}
		r[i] = s
	}
	return r
}

// lsqSubset solves unconstrained least squares over the passive columns by
// Householder QR; other entries of the result are zero.
func lsqSubset(A [][]float64, b []float64, passive []bool) ([]float64, error) {
	var cols []int
	for j, p := range passive {
		if p {
			cols = append(cols, j)
		}
	}
	m, k := len(A), len(cols)
	if k > m {
		return nil, errors.New("nnls: fewer observations than coefficients")
	}
	M := make([][]float64, m)
	for i := range A {
		M[i] = make([]float64, k+1)
		for c, j := range cols {
			M[i][c] = A[i][j]
		}
		M[i][k] = b[i]
	}
	for c := 0; c < k; c++ {
		norm := 0.0
		for i := c; i < m; i++ {
			norm += M[i][c] * M[i][c]
		}
		norm = math.Sqrt(norm)
		if norm == 0 {
			return nil, errors.New("nnls: rank-deficient design (a column is all zeros)")
		}
		if M[c][c] > 0 {
			norm = -norm
		}
		v := make([]float64, m)
		v[c] = M[c][c] - norm
		for i := c + 1; i < m; i++ {
			v[i] = M[i][c]
		}
		vv := 0.0
		for i := c; i < m; i++ {
			vv += v[i] * v[i]
		}
		if vv == 0 {
			continue
		}
		for j := c; j <= k; j++ {
			d := 0.0
			for i := c; i < m; i++ {
				d += v[i] * M[i][j]
			}
			f := 2 * d / vv
			for i := c; i < m; i++ {
				M[i][j] -= f * v[i]
			}
		}
	}
	x := make([]float64, k)
	for c := k - 1; c >= 0; c-- {
		s := M[c][k]
		for j := c + 1; j < k; j++ {
			s -= M[c][j] * x[j]
		}
		if math.Abs(M[c][c]) < 1e-14 {
			return nil, errors.New("nnls: rank-deficient design")
		}
		x[c] = s / M[c][c]
	}
	out := make([]float64, len(passive))
	for c, j := range cols {
		out[j] = x[c]
	}
	return out, nil
}

"""Prefill attention's wave quantisation in prefill.csv (docs/calibration.md).

Fits the prefill step time, by least squares relative to each measurement,
as c0 + c1*n + c2*n_eff*(p + n/2), where n_eff is n rounded up to whole
waves of W query tokens (W = 0: n itself, the profile's form). One wave of
FlashAttention-2's forward grid (ceil(n/128) query blocks x 32 heads, one
CTA per SM) on the H200's 132 SMs is 132 * 128 / 32 = 528 tokens. Prints
each W's fit against the CUDA-graph times, then W = 0 and 528 with the
median eager term against the eager times where they were measured.

    python3 calibration/prefill_waves.py calibration/data/triton/prefill.csv
"""
import csv
import math
import statistics as st
import sys


def solve(a, b):
    n = len(b)
    m = [a[i][:] + [b[i]] for i in range(n)]
    for i in range(n):
        piv = max(range(i, n), key=lambda r: abs(m[r][i]))
        m[i], m[piv] = m[piv], m[i]
        for r in range(n):
            if r != i:
                f = m[r][i] / m[i][i]
                m[r] = [x - f * y for x, y in zip(m[r], m[i])]
    return [m[i][n] / m[i][i] for i in range(n)]


def neff(n, w):
    return n if w == 0 else math.ceil(n / w) * w


def fit(pts, w):
    x = [[1 / g, n / g, neff(n, w) * (p + n / 2) / g] for n, p, g, _ in pts]
    a = [[sum(r[i] * r[j] for r in x) for j in range(3)] for i in range(3)]
    b = [sum(r[i] for r in x) for i in range(3)]
    return solve(a, b)


def model(c, n, p, w):
    return c[0] + c[1] * n + c[2] * neff(n, w) * (p + n / 2)


def main(path):
    pts = []
    for r in csv.DictReader(open(path)):
        e = float(r["eager_model_s"]) if r.get("eager_model_s") else 0.0
        pts.append((int(r["n"]), int(r["p"]), float(r["model_s"]), e))
    for w in (0, 132, 264, 396, 528, 660, 792, 1056):
        c = fit(pts, w)
        err = [model(c, n, p, w) / g - 1 for n, p, g, _ in pts]
        small = [model(c, n, p, w) / g - 1 for n, p, g, _ in pts if n <= 512]
        print(f"W={w:5d}  graph times: MAPE {100 * st.mean(map(abs, err)):.1f}%  max {100 * max(map(abs, err)):.1f}%"
              f"  n<=512 median {100 * st.median(small):+.1f}% MAPE {100 * st.mean(map(abs, small)):.1f}%")
    eager = st.median(e - g for _, _, g, e in pts if e > 0)
    for w in (0, 528):
        c = fit(pts, w)
        err, small = [], []
        for n, p, g, e in pts:
            m, meas = model(c, n, p, w), g
            if e > 0:
                m, meas = m + eager, e
            err.append(m / meas - 1)
            if n <= 512:
                small.append(m / meas - 1)
        print(f"W={w:5d}  as run (+{1e3 * eager:.2f} ms eager, {len(pts)} points): MAPE {100 * st.mean(map(abs, err)):.1f}%"
              f"  n<=512 median {100 * st.median(small):+.1f}% MAPE {100 * st.mean(map(abs, small)):.1f}%")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "calibration/data/triton/prefill.csv")

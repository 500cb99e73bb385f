#!/usr/bin/env python3
"""Prefill attention alone: FlashAttention-2 against cuDNN SDPA (PyTorch only).

Uses calibration/measure.py's own attention paths (attn_prefill) with its
shapes and layouts: n new queries (32 heads, dim 128, token-major) against
p cached + n new keys (4 KV heads, a token-major pool), causal aligned to the
lower right. For every path it prints

  * the error against measure.py's float32 reference with an explicit
    lower-right mask (and whether cuDNN's plain is_causal aligns upper-left);
  * the error against flash at the timed shapes;
  * the median time of one call (CUDA events) at a few (n, p), and the
    effective TFLOP/s at 4·128·32 FLOP per (query head, key) pair, counting
    n·p + n·(n+1)/2 pairs;
  * the wall time of the first call at a new shape (cuDNN builds a plan).

Then it times a 4-layer prefill from CUDA graphs with each backend at a few
points (measure.py's prefill_point), to check that capture works and to show
what the attention saving is worth in the whole layer.

Run:  python3 calibration/sdpa_compare.py --out $OUT
"""

import argparse
import json
import math
import os
import sys
import time
import types

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure as m  # noqa: E402

FLOP_PER_PAIR = 4 * m.HD * m.QH


def pairs(n, p):
    return n * p + n * (n + 1) / 2


def time_call(fn, reps_target_s=0.25, min_reps=3, max_reps=20):
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    t = time.time()
    fn()
    torch.cuda.synchronize()
    first = time.time() - t
    fn()
    ts = []
    while len(ts) < max_reps:
        ev0.record()
        fn()
        ev1.record()
        torch.cuda.synchronize()
        ts.append(ev0.elapsed_time(ev1) / 1e3)
        if len(ts) >= min_reps and sum(ts) > reps_target_s:
            break
    ts.sort()
    return ts[len(ts) // 2], first, len(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", action="store_true", help="also time 4-layer prefills from CUDA graphs")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    res = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
           "device": torch.cuda.get_device_name(0), "checks": {}, "sdpa_api": {}, "timing": [], "layers": []}
    torch.manual_seed(0)
    T0 = time.time()

    def log(*a):
        print(f"[{time.time() - T0:6.1f}s]", *a, flush=True)

    log(json.dumps({k: res[k] for k in ("torch", "cuda", "cudnn", "device")}))

    # ---- correctness against the float32 lower-right reference
    paths = [p for b in ("flash", "cudnn") for p in m.PREFILL_PATHS[b]]
    good = []
    for mode in paths:
        m.ATTN["prefill"] = mode
        errs = {}
        try:
            for n, S in ((96, 256), (128, 128), (200, 1000)):
                q, k, v = m.attn_inputs(n, S)
                errs[f"n{n}_S{S}"] = m.rel(m.attn_prefill(q, k, v), m.attn_reference(q, k, v, causal_offset=True))
            # the same with the upper-left alignment, to tell which one a wrong path uses
            q, k, v = m.attn_inputs(96, 256)
            kk = k.float().repeat_interleave(m.GROUP, dim=1)
            vv = v.float().repeat_interleave(m.GROUP, dim=1)
            s = (q.float() @ kk.transpose(-1, -2)) * m.SCALE
            i = torch.arange(96, device=m.DEV).unsqueeze(1)
            j = torch.arange(256, device=m.DEV).unsqueeze(0)
            ul = torch.softmax(s.masked_fill(j > i, float("-inf")), dim=-1) @ vv
            errs["n96_S256_vs_upper_left"] = m.rel(m.attn_prefill(q, k, v), ul)
        except Exception as ex:  # noqa: BLE001
            errs["error"] = f"{type(ex).__name__}: {ex}"
        ok = "error" not in errs and max(v for kk_, v in errs.items() if "upper" not in kk_) < 2e-2
        errs["ok"] = ok
        res["checks"][mode] = errs
        log(f"check {mode:22s}", json.dumps(errs))
        if ok:
            good.append(mode)

    # ---- the public SDPA API with the cuDNN backend (for the record)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.bias import causal_lower_right
    q, k, v = m.attn_inputs(96, 256)
    ref = m.attn_reference(q, k, v, causal_offset=True)
    for label, kw in (("is_causal", {"is_causal": True}),
                      ("causal_lower_right", {"attn_mask": causal_lower_right(96, 256)}),
                      ("explicit_bool_mask", {"attn_mask": torch.ones(96, 256, dtype=torch.bool, device=m.DEV).tril(160)})):
        try:
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                o = F.scaled_dot_product_attention(q, k, v, scale=m.SCALE, enable_gqa=True, **kw)
            res["sdpa_api"][label] = {"rel_err": m.rel(o, ref)}
        except Exception as ex:  # noqa: BLE001
            res["sdpa_api"][label] = {"error": f"{type(ex).__name__}: {str(ex)[:300]}"}
        log(f"F.sdpa cudnn {label}:", json.dumps(res["sdpa_api"][label]))

    # F.sdpa with causal_lower_right on the cuDNN backend, timed too when it
    # passed: the run decides nothing with it, it is only for the record
    def sdpa_lower_right(q, k, v):
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(q.shape[2], k.shape[2]),
                                                  scale=m.SCALE, enable_gqa=True)

    if res["sdpa_api"]["causal_lower_right"].get("rel_err", 1.0) < 2e-2:
        good.append("sdpa_cudnn_lower_right")

    def call(mode, q, k, v):
        if mode == "sdpa_cudnn_lower_right":
            return sdpa_lower_right(q, k, v)
        m.ATTN["prefill"] = mode
        return m.attn_prefill(q, k, v)

    # ---- attention-only timing
    pts = [(512, 0), (512, 65536), (2048, 0), (2048, 16384), (8192, 0), (8192, 32768),
           (8192, 131072), (32768, 0), (32768, 98304)]
    timed_modes = [x for x in ("flash_gqa", "cudnn_causal", "cudnn_split", "cudnn_split_expand",
                               "sdpa_cudnn_lower_right") if x in good]
    for n, p in pts:
        q, k, v = m.attn_inputs(n, p + n)
        row = {"n": n, "p": p}
        outs = {}
        for mode in timed_modes:
            if mode.endswith("_expand") and n * (n + p) > 8192 * 40960:
                continue
            with torch.no_grad():
                med, first, reps = time_call(lambda: call(mode, q, k, v))
                outs[mode] = call(mode, q, k, v)
            row[mode] = {"ms": med * 1e3, "tflops": FLOP_PER_PAIR * pairs(n, p) / med / 1e12,
                         "first_call_ms": first * 1e3, "reps": reps,
                         "ns_per_pair_48l": 48 * med / pairs(n, p) * 1e9}
        if "flash_gqa" in outs:
            for mode, o in outs.items():
                if mode != "flash_gqa":
                    row[mode]["rel_vs_flash"] = m.rel(o, outs["flash_gqa"])
        outs.clear()
        res["timing"].append(row)
        base = row.get("flash_gqa", {}).get("ms")
        txt = " ".join(f"{md}={row[md]['ms']:.3f}ms({row[md]['tflops']:.0f}TF"
                       + (f",x{base / row[md]['ms']:.2f}" if base else "") + f",1st {row[md]['first_call_ms']:.0f}ms)"
                       for md in timed_modes if md in row)
        log(f"attn n={n:6d} p={p:7d}: {txt}")
        del q, k, v
        torch.cuda.empty_cache()
    with open(os.path.join(args.out, "sdpa_compare.json"), "w") as f:
        json.dump(res, f, indent=2)

    # ---- 4 layers from CUDA graphs, each backend
    if args.layers:
        cudnn_mode = next((x for x in good if x.startswith("cudnn")), None)
        cap = 65536 + 8192 + 256
        gen = torch.Generator(device=m.DEV)
        gen.manual_seed(1234)
        m.ARANGE_E = torch.arange(m.E, device=m.DEV)
        m.build_rope(cap + 1)
        layers = [m.Layer(gen, cap, i) for i in range(4)]
        H = m.Head(gen)
        a = types.SimpleNamespace(graphs=True, warmup=2, min_reps=5, max_reps=15, target_s=0.2, eager_below_s=0.0)
        for n, p in ((512, 0), (2048, 16384), (8192, 0), (8192, 65536)):
            row = {"n": n, "p": p}
            for mode in ("flash_gqa", cudnn_mode):
                if mode is None:
                    continue
                m.ATTN["prefill"] = mode
                tl, th, graph, _, _ = m.prefill_point(layers, H, n, p, a)
                ml = m.median(tl)
                row[mode] = {"layers4_ms": ml * 1e3, "model_ms": (m.median(th) + ml * 12) * 1e3, "graph": graph}
            res["layers"].append(row)
            log("layers", json.dumps(row))
            torch.cuda.empty_cache()
    res["elapsed_s"] = time.time() - T0
    with open(os.path.join(args.out, "sdpa_compare.json"), "w") as f:
        json.dump(res, f, indent=2)
    log("done")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Check and tune the Triton fused MoE of calibration/triton_kernels.py on
this GPU, then time one MoE block against measure.py's grouped-GEMM path.

1. Checks (measure.check_triton): every kernel against a float32 reference on
   fresh random inputs; each candidate GEMM config is checked before it is timed.
2. Tuning: for each token count T, each candidate block shape of the gate/up
   GEMM (gemm1) and of the down GEMM (gemm2) is timed alone, from a CUDA graph
   that runs it over 4 layers' experts in turn (so no layer finds its weights in
   L2), median of 5 x 20 replays. Both GEMMs share one row block BM (one
   alignment); for each BM the best of each GEMM is summed and the best BM wins.
3. The whole MoE block (router GEMM, routing, alignment, two GEMMs, sum) with
   the chosen table against the grouped-GEMM block of measure.py, 4 layers from
   one CUDA graph, per layer; with the bytes of the experts the tokens touch.

Writes under --out: moe_configs.json (the table measure.py --moe-configs reads),
moe_tune.json (every timing, the checks), and prints a short table.
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure as M  # noqa: E402
import triton_kernels as TK  # noqa: E402

M.TK = TK

SMALL = [  # BM=16: (BN, BK, warps, stages)
    (32, 128, 4, 4), (64, 64, 4, 4), (64, 128, 4, 3), (64, 128, 4, 4), (64, 256, 4, 3),
    (128, 64, 4, 4), (128, 128, 4, 3), (32, 256, 4, 3),
]
MID = {32: [(64, 64, 4, 4), (64, 128, 4, 3), (128, 64, 4, 4), (128, 64, 8, 3)],
       64: [(64, 64, 4, 4), (128, 64, 4, 4), (128, 64, 8, 4), (64, 128, 4, 3), (256, 64, 8, 3)],
       128: [(64, 64, 4, 4), (128, 64, 8, 3), (128, 64, 8, 4), (256, 64, 8, 3)]}


def bms_for(T):
    if T <= 32:
        return [16]
    if T <= 64:
        return [16, 32]
    if T <= 512:
        return [16, 32, 64]
    if T <= 2048:
        return [32, 64, 128]
    return [64, 128]


def cands(BM):
    return SMALL if BM == 16 else MID[BM]


def cfg(BM, c, gm):
    return dict(BM=BM, BN=c[0], BK=c[1], GROUP_M=gm, warps=c[2], stages=c[3])


def graph_time(fn, reps=20, trials=5):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    g.replay()
    torch.cuda.synchronize()
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(trials):
        ev0.record()
        for _ in range(reps):
            g.replay()
        ev1.record()
        torch.cuda.synchronize()
        ts.append(ev0.elapsed_time(ev1) / 1e3 / reps)
    del g
    return sorted(ts)[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokens", default="1,4,16,64,128,256,512,1024,2048,4096,8192,16384")
    ap.add_argument("--compare", default="1,8,32,64,128,340,1024,2048,8192")
    ap.add_argument("--budget", type=float, default=240, help="seconds for the tuning sweep")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    torch.manual_seed(0)
    dev = M.DEV
    M.ARANGE_E = torch.arange(M.E, device=dev)
    M.build_rope(70000)
    gen = torch.Generator(device=dev)
    gen.manual_seed(7)
    layers = [M.Layer(gen, 70000, i) for i in range(4)]
    res = {"checks": {}, "tune": [], "compare": []}
    import triton
    res["triton"] = triton.__version__
    res["torch"] = torch.__version__
    res["device"] = torch.cuda.get_device_name(0)

    def log(*a):
        print(f"[{time.time() - t0:7.1f}s]", *a, flush=True)

    def save():
        with open(os.path.join(args.out, "moe_tune.json"), "w") as f:
            json.dump(res, f, indent=1)

    # 1. checks with the built-in default table
    M.check_triton(layers[0], res["checks"])
    log("checks passed:", json.dumps({k: v for k, v in res["checks"].items() if "moe_BM" not in k}))
    save()

    # 2. tuning
    table = {}
    t_end = time.time() + args.budget
    checked = set()
    for T in [int(v) for v in args.tokens.split(",")]:
        if time.time() > t_end:
            log("tuning budget spent at T =", T)
            break
        n = T * M.TOPK
        hs = [torch.randn(T, M.HIDDEN, device=dev, dtype=M.BF) for _ in layers]
        routes = [TK.route(F.linear(h, L.wr), M.TOPK) for h, L in zip(hs, layers)]
        best = None
        for BM in bms_for(T):
            al = [TK.align(ids, M.E, BM) for ids, _ in routes]
            acts = [torch.empty(n, M.INTER, device=dev, dtype=M.BF) for _ in layers]
            ys = [torch.empty(n, M.HIDDEN, device=dev, dtype=M.BF) for _ in layers]
            gm = 1 if BM == 16 else 8
            per = {}
            for which in ("g1", "g2"):
                bestw = None
                for c in cands(BM):
                    cf = cfg(BM, c, gm)
                    key = (which, json.dumps(cf, sort_keys=True))
                    try:
                        if key not in checked:  # correctness of this config first
                            ck = {}
                            mate = dict(BM=BM, BN=64, BK=64, GROUP_M=1, warps=4, stages=2)
                            pair = (cf, mate) if which == "g1" else (mate, cf)
                            M.check_triton_moe_only(layers[0], ck, [pair])
                            checked.add(key)

                        if which == "g1":
                            def fn():
                                for i, L in enumerate(layers):
                                    s, e, npst, cap = al[i]
                                    TK.gemm1(hs[i], L.w13, s, e, npst, cap, n, M.TOPK, cf, out=acts[i])
                        else:
                            def fn():
                                for i, L in enumerate(layers):
                                    s, e, npst, cap = al[i]
                                    TK.gemm2(acts[i], L.w2, routes[i][1].view(-1), s, e, npst, cap, n, cf,
                                             out=ys[i])
                        t = graph_time(fn) / len(layers)
                    except SystemExit as ex:
                        log(f"T={T} {which} {cf}: check failed ({ex}); skipped")
                        res["tune"].append({"T": T, "gemm": which, "cfg": cf, "error": str(ex)})
                        continue
                    except Exception as ex:  # noqa: BLE001 (out of resources and the like)
                        log(f"T={T} {which} {cf}: {type(ex).__name__}: {str(ex)[:120]}")
                        res["tune"].append({"T": T, "gemm": which, "cfg": cf, "error": f"{type(ex).__name__}"})
                        continue
                    res["tune"].append({"T": T, "gemm": which, "cfg": cf, "s": t})
                    if bestw is None or t < bestw[0]:
                        bestw = (t, cf)
                per[which] = bestw
            if per.get("g1") and per.get("g2"):
                tot = per["g1"][0] + per["g2"][0]
                if best is None or tot < best[0]:
                    best = (tot, per["g1"][1], per["g2"][1], per["g1"][0], per["g2"][0])
        if best:
            table[T] = {"g1": best[1], "g2": best[2], "g1_s": best[3], "g2_s": best[4]}
            act_e = float(sum(torch.unique(r[0]).numel() for r in routes)) / len(routes)
            byts = act_e * (2 * M.INTER * M.HIDDEN + M.HIDDEN * M.INTER) * 2
            log(f"T={T:6d}: BM={best[1]['BM']:3d} g1 {best[3] * 1e6:8.1f} us {best[1]}  "
                f"g2 {best[4] * 1e6:8.1f} us {best[2]}  experts {act_e:.1f} -> "
                f"{byts / (best[3] + best[4]) / 1e12:.2f} TB/s")
        save()
        torch.cuda.empty_cache()
    out_tab = {"device": res["device"], "triton": res["triton"],
               "made_by": "calibration/moe_tune.py", "table": {str(k): v for k, v in table.items()}}
    with open(os.path.join(args.out, "moe_configs.json"), "w") as f:
        json.dump(out_tab, f, indent=1)
    TK.load_table(os.path.join(args.out, "moe_configs.json"))
    # the chosen table, checked once more as a whole
    M.check_triton_moe_only(layers[0], res["checks"], [TK.pick(T) for T in table])
    save()

    # 3. whole MoE block, grouped GEMM against the fused kernels
    log("T        grouped_mm us/layer   triton us/layer   speed-up   experts  triton TB/s")
    for T in [int(v) for v in args.compare.split(",")]:
        hs = [torch.randn(T, M.HIDDEN, device=dev, dtype=M.BF) for _ in layers]
        ids = [TK.route(F.linear(h, L.wr), M.TOPK)[0] for h, L in zip(hs, layers)]
        act_e = float(sum(torch.unique(i).numel() for i in ids)) / len(ids)
        byts = act_e * 3 * M.INTER * M.HIDDEN * 2 + M.E * M.HIDDEN * 2

        def fg():
            for h, L in zip(hs, layers):
                M.moe_grouped(h, L)

        def ft():
            for h, L in zip(hs, layers):
                TK.fused_moe(h, L.wr, L.w13, L.w2, M.TOPK)
        tg = graph_time(fg) / len(layers)
        tt = graph_time(ft) / len(layers)
        res["compare"].append({"T": T, "grouped_mm_s": tg, "triton_s": tt, "experts": act_e, "bytes": byts})
        log(f"{T:6d}   {tg * 1e6:12.1f}   {tt * 1e6:12.1f}   {tg / tt:6.2f}x   {act_e:6.1f}   "
            f"{byts / tt / 1e12:6.2f}")
        save()
    res["elapsed_s"] = time.time() - t0
    save()


if __name__ == "__main__":
    main()

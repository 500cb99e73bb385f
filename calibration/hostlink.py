#!/usr/bin/env python3
"""Time the GPU's host link (PCIe) for the engine model's host KV tier.

Writes CSV rows to --out/hostlink.csv: pinned host -> device (h2d) and device
-> host (d2h) copies of 1 MiB .. 10 GiB, each the median of --repeats timed
copies (CUDA events) after two warm-ups; the same payload as 96 equal chunks
(48 layers x K, V: HiCache's layer-wise load); and an overlap check: a bf16
matrix product alone, the h2d copy alone, and both at once on two streams,
to see how much of a load a prefill's compute hides. meta.json records the
device and versions.
"""
import argparse, csv, json, os, statistics
import torch

def timed(fn, repeats):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(repeats):
        s.record(); fn(); e.record(); e.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    return statistics.median(ts)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    dev = torch.device("cuda:0")
    big = 10 * 1024**3
    host = torch.empty(big, dtype=torch.uint8, pin_memory=True)
    host.fill_(1)
    gpu = torch.empty(big, dtype=torch.uint8, device=dev)
    rows = []
    sizes = [2**20 * 4**k for k in range(0, 7)] + [4 * 1024**3, 9830400000, big]
    for n in sizes:
        h, g = host[:n], gpu[:n]
        t = timed(lambda: g.copy_(h, non_blocking=True), a.repeats)
        rows.append(dict(kind="h2d", bytes=n, chunks=1, seconds=t))
        t = timed(lambda: h.copy_(g, non_blocking=True), a.repeats)
        rows.append(dict(kind="d2h", bytes=n, chunks=1, seconds=t))
        print(rows[-2], rows[-1], flush=True)
    for n in [96 * 2**20, 1024**3 // 96 * 96, 9830400000 // 96 * 96]:
        c = n // 96
        def chunked():
            for i in range(96):
                gpu[i * c:(i + 1) * c].copy_(host[i * c:(i + 1) * c], non_blocking=True)
        t = timed(chunked, a.repeats)
        rows.append(dict(kind="h2d", bytes=n, chunks=96, seconds=t))
        print(rows[-1], flush=True)
    # overlap: compute on the default stream, load on a side stream
    x = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
    def mm():
        for _ in range(40):
            torch.mm(x, x)
    n = 4 * 1024**3
    side = torch.cuda.Stream()
    def load():
        with torch.cuda.stream(side):
            gpu[:n].copy_(host[:n], non_blocking=True)
        torch.cuda.current_stream().wait_stream(side)
    def both():
        with torch.cuda.stream(side):
            gpu[:n].copy_(host[:n], non_blocking=True)
        mm()
        torch.cuda.current_stream().wait_stream(side)
    for kind, fn in [("mm_alone", mm), ("h2d_alone_side", load), ("mm_with_h2d", both)]:
        t = timed(fn, a.repeats)
        rows.append(dict(kind=kind, bytes=n if kind != "mm_alone" else 0, chunks=1, seconds=t))
        print(rows[-1], flush=True)
    with open(os.path.join(a.out, "hostlink.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["kind", "bytes", "chunks", "seconds"])
        w.writeheader(); w.writerows(rows)
    meta = dict(device=torch.cuda.get_device_name(0), torch=torch.__version__, cuda=torch.version.cuda)
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(meta)

if __name__ == "__main__":
    main()

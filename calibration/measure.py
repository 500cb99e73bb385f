#!/usr/bin/env python3
"""Time a Qwen3-30B-A3B-shaped layer stack on one NVIDIA GPU (PyTorch only).

What it measures, each point with warm-ups, CUDA-event timing and the median
of >= 5 repeats, written row by row to CSV files under --out so that a run cut
short still leaves its finished points:

  copy.csv      device-to-device copies (tensor.copy_) of 1 MiB .. 8 GiB on
                cuda:0, and cuda:0 -> cuda:1 when a second GPU is present;
                also the same payload as 96 equal chunks (48 layers x K, V).
  decode.csv    one decode step for batch B and total context C (uniform
                C/B tokens per sequence), layers captured in a CUDA graph.
  prefill.csv   prefill of n new tokens after a cached prefix of p tokens,
                replayed from a CUDA graph (GPU time), and also eagerly where
                the graph took under --eager-below-s (eager_* columns).
  prefill_l48.csv, decode_l48.csv
                a few points with all 48 layers, to check the 48/L scaling.
  prefill_l48_offset.csv
                small prefills again, at L and 48 layers, with a fixed random
                offset on every layer's router logits (see docs/calibration.md:
                deep random stacks collapse a prompt's tokens onto few experts).
  mixed.csv     with --mixed-points: n new tokens after p cached and a decode
                batch B with C context tokens, in one forward.
  meta.json     torch/CUDA versions, device, mem_get_info, kernel checks,
                distinct experts per layer.

The model: hidden 2048, 48 layers (a subset of L distinct layers is timed and
scaled by 48/L; embedding, final norm, lm_head and argmax are timed apart and
added once), GQA 32 query / 4 KV heads of dim 128, q/k RMSNorm, RoPE (theta
1e6), MoE 128 experts top-8 with intermediate 768 (softmax router, top-k
renormalised), vocab 151,936, random bf16 weights. Every layer owns its
weights and its KV pool, so a layer never finds the previous one's data in L2.

Kernels: dense projections are cuBLAS (F.linear); MoE sorts the token-expert
pairs by expert and runs torch._grouped_mm (CUTLASS grouped GEMM, SM90) for
gate/up and down, then un-permutes and sums the top-8 outputs weighted by the
router; decode attention is FlashAttention-2 as vendored in PyTorch (the 8
query heads of each KV head packed as 8 query rows, non-causal). Prefill
attention is causal aligned to the lower right, so the n new queries see the
whole prefix: --attn-prefill flash (default) uses FlashAttention-2,
--attn-prefill cudnn uses cuDNN SDPA as two calls (prefix keys unmasked, new
keys causal) merged by their log-sum-exps; see attn_prefill.
--kernels triton (calibration/triton_kernels.py, block sizes from
moe_configs_h200.json) replaces the MoE by a Triton fused MoE (pairs sorted by
expert into padded row blocks, one GEMM launch per projection over all experts,
SiLU-mul and router weights in the epilogues) and the norms, RoPE, KV store and
residual adds by fused Triton kernels: about 13 kernels a layer instead of ~40.
--mixed-points also times steps that carry a prefill chunk and a decode batch
in one forward (mixed.csv).

Run:  python3 calibration/measure.py --out $OUT            (full grid)
      python3 calibration/measure.py --out $OUT --attn-prefill cudnn --skip copy,decode,validate
                                                          (the committed prefill grid)
      python3 calibration/measure.py --out $OUT --kernels triton --attn-prefill cudnn --skip copy
                                                          (the committed grid, calibration/data/triton)
      python3 calibration/measure.py --out $OUT --smoke    (small grid)
"""

import argparse
import csv
import json
import math
import os
import platform
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

HIDDEN = 2048
LAYERS = 48
QH = 32
KVH = 4
HD = 128
E = 128
TOPK = 8
INTER = 768
VOCAB = 151936
EPS = 1e-6
THETA = 1_000_000.0
GROUP = QH // KVH
SCALE = 1.0 / math.sqrt(HD)

DEV = torch.device("cuda:0")
BF = torch.bfloat16

T0 = time.time()


def log(*a):
    print(f"[{time.time() - T0:7.1f}s]", *a, flush=True)


# ---------------------------------------------------------------- weights


class Layer:
    def __init__(self, gen, kv_cap, index=0):
        self.index = index
        def w(*shape, fan_in):
            t = torch.empty(*shape, device=DEV, dtype=BF)
            t.normal_(0.0, 1.0 / math.sqrt(fan_in), generator=gen)
            return t

        self.ln1 = 1.0 + 0.1 * w(HIDDEN, fan_in=1)
        self.wqkv = w((QH + 2 * KVH) * HD, HIDDEN, fan_in=HIDDEN)
        self.qn = 1.0 + 0.1 * w(HD, fan_in=1)
        self.kn = 1.0 + 0.1 * w(HD, fan_in=1)
        self.wo = w(HIDDEN, QH * HD, fan_in=QH * HD)
        self.ln2 = 1.0 + 0.1 * w(HIDDEN, fan_in=1)
        # router in fp32 logits like SGLang (bf16 weights, fp32 softmax)
        self.wr = w(E, HIDDEN, fan_in=HIDDEN)
        # experts stored (E, N, K) row-major; _grouped_mm gets (E, K, N) views
        self.w13 = w(E, 2 * INTER, HIDDEN, fan_in=HIDDEN)
        self.w2 = w(E, HIDDEN, INTER, fan_in=INTER)
        self.w13t = self.w13.transpose(1, 2)
        self.w2t = self.w2.transpose(1, 2)
        # KV pool in SGLang's token-major layout [token, kv_head, dim]
        self.kv_cap = kv_cap
        self.kpool = w(kv_cap, KVH, HD, fan_in=1)
        self.vpool = w(kv_cap, KVH, HD, fan_in=1)


class Head:
    def __init__(self, gen):
        def w(*shape, fan_in):
            t = torch.empty(*shape, device=DEV, dtype=BF)
            t.normal_(0.0, 1.0 / math.sqrt(fan_in), generator=gen)
            return t

        self.embed = w(VOCAB, HIDDEN, fan_in=1)
        self.norm = 1.0 + 0.1 * w(HIDDEN, fan_in=1)
        self.lm_head = w(VOCAB, HIDDEN, fan_in=HIDDEN)


ROPE = {"on": True, "cos": None, "sin": None}


def build_rope(max_pos):
    inv = 1.0 / (THETA ** (torch.arange(0, HD, 2, device=DEV, dtype=torch.float32) / HD))
    pos = torch.arange(max_pos, device=DEV, dtype=torch.float32)
    f = torch.outer(pos, inv)
    ROPE["cos"] = f.cos().to(BF)
    ROPE["sin"] = f.sin().to(BF)


def rope(x, pos):
    # x (T, heads, HD); neox style (Qwen3)
    if not ROPE["on"]:
        return x
    c = ROPE["cos"].index_select(0, pos).unsqueeze(1)
    s = ROPE["sin"].index_select(0, pos).unsqueeze(1)
    x1, x2 = x[..., : HD // 2], x[..., HD // 2 :]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


# ---------------------------------------------------------------- MoE

MOE = {"kernel": "grouped_mm"}
ARANGE_E = None


ROUTER = {"noise": None, "record": None}


def moe_grouped(h, L):
    T = h.shape[0]
    logits = F.linear(h, L.wr).float()
    if ROUTER["noise"] is not None:
        # fixed per-layer random offset: every layer routes like a fresh one
        logits = logits + ROUTER["noise"][L.index][:T]
    probs = torch.softmax(logits, dim=-1)
    topw, topi = probs.topk(TOPK, dim=-1)
    topw = topw / topw.sum(dim=-1, keepdim=True)
    flat = topi.view(-1)
    if ROUTER["record"] is not None:  # diagnostics only (host sync)
        ROUTER["record"].append(int(torch.unique(flat).numel()))
    sorted_ids, order = torch.sort(flat)
    offs = torch.searchsorted(sorted_ids, ARANGE_E, right=True, out_int32=True)
    tok = order // TOPK
    xs = h.index_select(0, tok)
    gu = torch._grouped_mm(xs, L.w13t, offs=offs)
    a = F.silu(gu[:, :INTER]) * gu[:, INTER:]
    y = torch._grouped_mm(a, L.w2t, offs=offs)
    un = torch.empty_like(y)
    un.index_copy_(0, order, y)
    return (un.view(T, TOPK, HIDDEN) * topw.to(BF).unsqueeze(-1)).sum(dim=1)


def moe_loop(h, L):
    # fallback: a loop over the experts that got tokens (host sync; eager only)
    T = h.shape[0]
    logits = F.linear(h, L.wr).float()
    probs = torch.softmax(logits, dim=-1)
    topw, topi = probs.topk(TOPK, dim=-1)
    topw = (topw / topw.sum(dim=-1, keepdim=True)).to(BF)
    flat = topi.view(-1)
    sorted_ids, order = torch.sort(flat)
    counts = torch.bincount(flat, minlength=E).tolist()
    tok = order // TOPK
    xs = h.index_select(0, tok)
    ys = torch.empty_like(xs)
    start = 0
    for e, c in enumerate(counts):
        if c == 0:
            continue
        seg = xs[start : start + c]
        gu = F.linear(seg, L.w13[e])
        a = F.silu(gu[:, :INTER]) * gu[:, INTER:]
        ys[start : start + c] = F.linear(a, L.w2[e])
        start += c
    un = torch.empty_like(ys)
    un.index_copy_(0, order, ys)
    return (un.view(T, TOPK, HIDDEN) * topw.unsqueeze(-1)).sum(dim=1)


def moe(h, L):
    if MOE["kernel"] == "grouped_mm":
        return moe_grouped(h, L)
    if MOE["kernel"] == "triton":
        return moe_triton(h, L)
    return moe_loop(h, L)


def moe_triton(h, L, residual=None):
    if ROUTER["noise"] is None and ROUTER["record"] is None:
        return TK.fused_moe(h, L.wr, L.w13, L.w2, TOPK, residual=residual)
    # the router-offset check and the expert count (as in moe_grouped)
    logits = F.linear(h, L.wr).float()
    if ROUTER["noise"] is not None:
        logits = logits + ROUTER["noise"][L.index][: h.shape[0]]
    if ROUTER["record"] is not None:  # diagnostics only (host sync)
        ROUTER["record"].append(int(torch.unique(logits.topk(TOPK, dim=-1).indices).numel()))
    return TK.fused_moe_logits(h, logits, L.w13, L.w2, TOPK, residual=residual)


# --kernels triton: the Triton fused MoE and fused norm/RoPE kernels of
# calibration/triton_kernels.py (imported only then, as TK)
TK = None
FUSE = {"on": False}


def moe_reference_routed(h, L, ids, w):
    # fp32 expert math for given routing (ids (T, K) int, w (T, K) float)
    hf = h.float()
    out = torch.zeros_like(hf)
    flat = ids.reshape(-1).long()
    tok = torch.arange(h.shape[0], device=h.device).repeat_interleave(TOPK)
    wf = w.reshape(-1).float()
    for e in torch.unique(flat).tolist():
        sel = (flat == e).nonzero().squeeze(1)
        x = hf[tok[sel]]
        gu = x @ L.w13[e].float().t()
        a = F.silu(gu[:, :INTER]) * gu[:, INTER:]
        out.index_add_(0, tok[sel], (a @ L.w2[e].float().t()) * wf[sel].unsqueeze(1))
    return out


def moe_reference(h, L):
    # routing from the same bf16 router logits (near-ties in the 8th place
    # would otherwise pick other experts); expert math in fp32
    hf = h.float()
    probs = torch.softmax(F.linear(h, L.wr).float(), dim=-1)
    topw, topi = probs.topk(TOPK, dim=-1)
    topw = topw / topw.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(hf)
    for t in range(h.shape[0]):
        for j in range(TOPK):
            e = int(topi[t, j])
            gu = L.w13[e].float() @ hf[t]
            a = F.silu(gu[:INTER]) * gu[INTER:]
            out[t] += topw[t, j] * (L.w2[e].float() @ a)
    return out


# ---------------------------------------------------------------- attention

ATTN = {"backend": "flash", "prefill": "flash_gqa"}
# Prefill attention paths, by --attn-prefill backend, in the order run_checks
# tries them; the first that matches the reference is used for the whole run.
#   flash_gqa     aten._scaled_dot_product_flash_attention, 4 KV heads, is_causal
#                 (this op aligns causal to the lower right)
#   cudnn_causal  aten._scaled_dot_product_cudnn_attention with is_causal: only
#                 right if cuDNN aligns causal to the lower right for Lq < Lk
#                 (PyTorch 2.11 + cuDNN 9.19 align it upper-left: it fails)
#   cudnn_split   two cuDNN calls: the n queries against the p cached keys with
#                 no mask, and against the n new keys with is_causal (Lq == Lk,
#                 so both alignments agree); the two halves are merged with their
#                 log-sum-exps (two small elementwise kernels)
#   *_expand      the same with K/V repeated to 32 heads first (that copy counts)
PREFILL_PATHS = {
    "flash": ("flash_gqa", "flash_expand"),
    "cudnn": ("cudnn_causal", "cudnn_split", "cudnn_causal_expand", "cudnn_split_expand"),
}


def expand_kv(k, v):
    return k.repeat_interleave(GROUP, dim=1), v.repeat_interleave(GROUP, dim=1)


def cudnn_attn(q, k, v, causal, lse):
    r = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, lse, 0.0, causal, False, scale=SCALE)
    return r[0], r[1]


def attn_prefill(q, k, v):
    # q (1, QH, n, HD); k, v (1, KVH, S, HD) with S = p + n; causal aligned
    # lower-right: query i sees keys 0 .. p+i
    mode = ATTN["prefill"]
    expand = mode.endswith("_expand")
    if mode.startswith("flash"):
        if expand:
            k, v = expand_kv(k, v)
        return torch.ops.aten._scaled_dot_product_flash_attention(
            q, k, v, 0.0, True, False, scale=SCALE
        )[0]
    if mode.startswith("cudnn_causal"):
        if expand:
            k, v = expand_kv(k, v)
        return cudnn_attn(q, k, v, True, False)[0]
    if mode.startswith("cudnn_split"):
        n, S = q.shape[2], k.shape[2]
        p = S - n
        kn, vn = k[:, :, p:], v[:, :, p:]
        if expand:
            kn, vn = expand_kv(kn, vn)
        on, ln = cudnn_attn(q, kn, vn, True, p > 0)
        if p == 0:
            return on
        kp, vp = k[:, :, :p], v[:, :, :p]
        if expand:
            kp, vp = expand_kv(kp, vp)
        op, lp = cudnn_attn(q, kp, vp, False, True)
        # softmax over both halves: weight of the prefix half = sigmoid(lse_p - lse_n)
        w = torch.sigmoid(lp.reshape(1, QH, n, 1) - ln.reshape(1, QH, n, 1))
        return torch.lerp(on.float(), op.float(), w).to(q.dtype)
    raise ValueError(f"unknown prefill attention path {mode}")


def attn_decode(q, k, v):
    # q (B, QH, HD) one token per sequence; k, v (B, KVH, S, HD).
    # The GROUP query heads that share a KV head become GROUP query rows.
    B = q.shape[0]
    qg = q.view(B, KVH, GROUP, HD)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        o = F.scaled_dot_product_attention(qg, k, v, is_causal=False, scale=SCALE)
    return o.reshape(B, QH * HD)


def attn_reference(q, k, v, causal_offset):
    # q (1|B, QH, n, HD), k/v (., KVH, S, HD); lower-right causal when causal_offset is not None
    k = k.float().repeat_interleave(GROUP, dim=1)
    v = v.float().repeat_interleave(GROUP, dim=1)
    s = (q.float() @ k.transpose(-1, -2)) * SCALE
    if causal_offset is not None:
        n, S = q.shape[2], k.shape[2]
        i = torch.arange(n, device=q.device).unsqueeze(1)
        j = torch.arange(S, device=q.device).unsqueeze(0)
        s = s.masked_fill(j > i + (S - n), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def attn_inputs(n, S):
    # q, k, v shaped and strided as layer_prefill passes them: q a (n, QH, HD)
    # tensor seen as (1, QH, n, HD); k, v the first S tokens of a token-major
    # [token, KVH, HD] pool seen as (1, KVH, S, HD)
    q = torch.randn(n, QH, HD, device=DEV, dtype=BF).unsqueeze(0).transpose(1, 2)
    k = torch.randn(S + 64, KVH, HD, device=DEV, dtype=BF)[:S].unsqueeze(0).transpose(1, 2)
    v = torch.randn(S + 64, KVH, HD, device=DEV, dtype=BF)[:S].unsqueeze(0).transpose(1, 2)
    return q, k, v


# ---------------------------------------------------------------- forward


def layer_prefill(x, L, p, pos):
    n = x.shape[0]
    h = F.rms_norm(x, (HIDDEN,), L.ln1, EPS)
    qkv = F.linear(h, L.wqkv)
    q = qkv[:, : QH * HD].view(n, QH, HD)
    k = qkv[:, QH * HD : (QH + KVH) * HD].view(n, KVH, HD)
    v = qkv[:, (QH + KVH) * HD :].view(n, KVH, HD)
    q = rope(F.rms_norm(q, (HD,), L.qn, EPS), pos)
    k = rope(F.rms_norm(k, (HD,), L.kn, EPS), pos)
    L.kpool[p : p + n].copy_(k)
    L.vpool[p : p + n].copy_(v)
    K = L.kpool[: p + n].unsqueeze(0).transpose(1, 2)
    V = L.vpool[: p + n].unsqueeze(0).transpose(1, 2)
    o = attn_prefill(q.unsqueeze(0).transpose(1, 2), K, V)  # (1, QH, n, HD)
    o = o.transpose(1, 2).reshape(n, QH * HD)
    x = x + F.linear(o, L.wo)
    h = F.rms_norm(x, (HIDDEN,), L.ln2, EPS)
    return x + moe(h, L)


def layer_prefill_fused(x, L, p, pos, slots):
    n = x.shape[0]
    h = TK.rmsnorm(x, L.ln1, EPS)
    qkv = F.linear(h, L.wqkv)
    q = TK.qknorm_rope(qkv, L.qn, L.kn, L.kpool, L.vpool, slots, pos, ROPE["cos"], ROPE["sin"], EPS,
                       QH, KVH, HD, rope=ROPE["on"])
    K = L.kpool[: p + n].unsqueeze(0).transpose(1, 2)
    V = L.vpool[: p + n].unsqueeze(0).transpose(1, 2)
    o = attn_prefill(q.unsqueeze(0).transpose(1, 2), K, V)
    o = o.transpose(1, 2).reshape(n, QH * HD)
    x, h = TK.rmsnorm(F.linear(o, L.wo), L.ln2, EPS, residual=x)
    return fused_moe_res(h, L, x)


def fused_moe_res(h, L, x):
    if MOE["kernel"] == "triton":
        return moe_triton(h, L, residual=x)
    return x + moe(h, L)


def layer_mixed_fused(x, L, n, p, B, S, pos, slots, dbase):
    # one forward over n prefill tokens (after p cached, pool slots p..p+n) and
    # B decode tokens (sequence b holds S tokens at pool slots dbase + b*S ...):
    # dense layers and the MoE see all n + B tokens at once, attention runs
    # apart for the two parts (cuDNN/FA2 prefill, FA2 decode)
    h = TK.rmsnorm(x, L.ln1, EPS)
    qkv = F.linear(h, L.wqkv)
    q = TK.qknorm_rope(qkv, L.qn, L.kn, L.kpool, L.vpool, slots, pos, ROPE["cos"], ROPE["sin"], EPS,
                       QH, KVH, HD, rope=ROPE["on"])
    K = L.kpool[: p + n].unsqueeze(0).transpose(1, 2)
    V = L.vpool[: p + n].unsqueeze(0).transpose(1, 2)
    op = attn_prefill(q[:n].unsqueeze(0).transpose(1, 2), K, V).transpose(1, 2).reshape(n, QH * HD)
    kv = L.kpool[dbase: dbase + B * S].view(B, S, KVH, HD)
    vv = L.vpool[dbase: dbase + B * S].view(B, S, KVH, HD)
    od = attn_decode(q[n:], kv.transpose(1, 2), vv.transpose(1, 2))
    o = torch.cat((op, od))
    x, h = TK.rmsnorm(F.linear(o, L.wo), L.ln2, EPS, residual=x)
    return fused_moe_res(h, L, x)


def layer_decode_fused(x, L, B, S, pos, slots, dbase=0):
    h = TK.rmsnorm(x, L.ln1, EPS)
    qkv = F.linear(h, L.wqkv)
    q = TK.qknorm_rope(qkv, L.qn, L.kn, L.kpool, L.vpool, slots, pos, ROPE["cos"], ROPE["sin"], EPS,
                       QH, KVH, HD, rope=ROPE["on"])
    kv = L.kpool[dbase: dbase + B * S].view(B, S, KVH, HD)
    vv = L.vpool[dbase: dbase + B * S].view(B, S, KVH, HD)
    o = attn_decode(q, kv.transpose(1, 2), vv.transpose(1, 2))
    x, h = TK.rmsnorm(F.linear(o, L.wo), L.ln2, EPS, residual=x)
    return fused_moe_res(h, L, x)


def layer_decode(x, L, B, S, pos):
    h = F.rms_norm(x, (HIDDEN,), L.ln1, EPS)
    qkv = F.linear(h, L.wqkv)
    q = qkv[:, : QH * HD].view(B, QH, HD)
    k = qkv[:, QH * HD : (QH + KVH) * HD].view(B, KVH, HD)
    v = qkv[:, (QH + KVH) * HD :].view(B, KVH, HD)
    q = rope(F.rms_norm(q, (HD,), L.qn, EPS), pos)
    k = rope(F.rms_norm(k, (HD,), L.kn, EPS), pos)
    kv = L.kpool[: B * S].view(B, S, KVH, HD)
    vv = L.vpool[: B * S].view(B, S, KVH, HD)
    kv[:, S - 1].copy_(k)
    vv[:, S - 1].copy_(v)
    o = attn_decode(q, kv.transpose(1, 2), vv.transpose(1, 2))
    x = x + F.linear(o, L.wo)
    h = F.rms_norm(x, (HIDDEN,), L.ln2, EPS)
    return x + moe(h, L)


def head_fn(H, ids, x_last):
    # embedding of the step's input tokens, final norm, lm_head, greedy sample
    e = H.embed.index_select(0, ids)
    h = F.rms_norm(x_last, (HIDDEN,), H.norm, EPS)
    logits = F.linear(h, H.lm_head)
    return logits.argmax(dim=-1), e


# ---------------------------------------------------------------- timing


def median(xs):
    s = sorted(xs)
    m = len(s) // 2
    return s[m] if len(s) % 2 else 0.5 * (s[m - 1] + s[m])


def time_pair(f_layers, f_head, warmup, min_reps, max_reps, target_s):
    for i in range(warmup):
        t = time.time()
        f_layers()
        f_head()
        torch.cuda.synchronize()
        if time.time() - t > 0.5:  # long points: one warm-up is enough
            break
    tl, th = [], []
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
    reps = min_reps
    i = 0
    while i < reps:
        ev[0].record()
        f_layers()
        ev[1].record()
        f_head()
        ev[2].record()
        torch.cuda.synchronize()
        tl.append(ev[0].elapsed_time(ev[1]) / 1e3)
        th.append(ev[1].elapsed_time(ev[2]) / 1e3)
        i += 1
        if i == 1:
            per = tl[0] + th[0]
            reps = max(min_reps, min(max_reps, int(target_s / max(per, 1e-6))))
    return tl, th


class Writer:
    def __init__(self, path, cols, mode="w"):
        self.f = open(path, mode, newline="")
        self.w = csv.writer(self.f)
        if mode == "w":
            self.w.writerow(cols)
        self.f.flush()

    def row(self, vals):
        self.w.writerow(vals)
        self.f.flush()


def fmt(x):
    return f"{x:.9g}"


# ---------------------------------------------------------------- phases


def run_copies(out, args, meta):
    w = Writer(os.path.join(out, "copy.csv"),
               ["kind", "bytes", "chunks", "seconds", "reps", "min_s", "max_s", "gb_per_s"])
    sizes = [1 << k for k in range(20, 34)]  # 1 MiB .. 8 GiB
    if args.smoke:
        sizes = [1 << 20, 1 << 26, 1 << 30]
    maxb = sizes[-1]
    src = torch.empty(maxb // 2, device=DEV, dtype=BF).normal_().view(torch.uint8)
    dst = torch.empty(maxb, device=DEV, dtype=torch.uint8)
    kinds = [("d2d", DEV, src, dst)]
    if torch.cuda.device_count() >= 2:
        d1 = torch.device("cuda:1")
        dst1 = torch.empty(maxb, device=d1, dtype=torch.uint8)
        meta["p2p_access_0_to_1"] = torch.cuda.can_device_access_peer(0, 1)
        kinds.append(("p2p_0to1", d1, src, dst1))
    t_end = time.time() + args.budget_copy
    ev0 = torch.cuda.Event(enable_timing=True)
    ev1 = torch.cuda.Event(enable_timing=True)
    for kind, _, s_buf, d_buf in kinds:
        for chunks in (1, 96):
            for b in sizes:
                if time.time() > t_end:
                    log("copy budget spent")
                    return
                if chunks > 1 and b < chunks * 4096:
                    continue
                cs = b // chunks
                srcs = [s_buf[i * cs:(i + 1) * cs] for i in range(chunks)]
                dsts = [d_buf[i * cs:(i + 1) * cs] for i in range(chunks)]

                def go():
                    for a, d in zip(srcs, dsts):
                        d.copy_(a, non_blocking=True)

                for _ in range(3):
                    go()
                torch.cuda.synchronize(0)
                if torch.cuda.device_count() >= 2:
                    torch.cuda.synchronize(1)
                ts = []
                for _ in range(args.copy_reps):
                    # PyTorch runs a peer copy on the source device's current stream
                    ev0.record()
                    go()
                    ev1.record()
                    for d in range(min(2, torch.cuda.device_count())):
                        torch.cuda.synchronize(d)
                    ts.append(ev0.elapsed_time(ev1) / 1e3)
                m = median(ts)
                tot = cs * chunks
                w.row([kind, tot, chunks, fmt(m), len(ts), fmt(min(ts)), fmt(max(ts)), fmt(tot / m / 1e9)])
                log(f"copy {kind} {tot / 2**20:9.1f} MiB x{chunks}: {m * 1e3:8.3f} ms {tot / m / 1e9:7.1f} GB/s")
    del src, dst
    kinds.clear()
    torch.cuda.empty_cache()


def timed(fl, fh, args):
    """Time fl (the layers) and fh (the head): replayed from CUDA graphs when
    they capture, else eager. Returns (layers times, head times, graph flag)."""
    if args.graphs and MOE["kernel"] in ("grouped_mm", "triton"):
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    fl()
                    fh()
            torch.cuda.current_stream().wait_stream(s)
            g1 = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g1):
                fl()
            g2 = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g2):
                fh()
            tl, th = time_pair(g1.replay, g2.replay, args.warmup, args.min_reps, args.max_reps, args.target_s)
            del g1, g2
            return tl, th, 1
        except Exception as ex:  # noqa: BLE001
            log(f"graph capture failed ({type(ex).__name__}: {ex}); eager from now on")
            args.graphs = False
            torch.cuda.synchronize()
    tl, th = time_pair(fl, fh, args.warmup, args.min_reps, args.max_reps, args.target_s)
    return tl, th, 0


def prefill_point(layers, H, n, p, args):
    x0 = torch.randn(n, HIDDEN, device=DEV, dtype=BF)
    ids = torch.randint(0, VOCAB, (n,), device=DEV)
    pos = torch.arange(p, p + n, device=DEV)
    state = {}

    def fl():
        x = x0
        for L in layers:
            if FUSE["on"]:
                x = layer_prefill_fused(x, L, p, pos, pos)
            else:
                x = layer_prefill(x, L, p, pos)
        state["x"] = x

    def fh():
        head_fn(H, ids, state["x"][-1:])

    with torch.no_grad():
        tl, th, graph = timed(fl, fh, args)
        state.clear()
        torch.cuda.empty_cache()
        el, eh = [], []
        # eager too (SGLang runs extend batches eagerly), where launch gaps can matter
        if graph and median(tl) < args.eager_below_s:
            el, eh = time_pair(fl, fh, args.warmup, args.min_reps, args.max_reps, args.target_s)
    state.clear()
    return tl, th, graph, el, eh


def decode_point(layers, H, B, C, args):
    S = max(1, C // B)
    x0 = torch.randn(B, HIDDEN, device=DEV, dtype=BF)
    ids = torch.randint(0, VOCAB, (B,), device=DEV)
    pos = torch.full((B,), S - 1, device=DEV, dtype=torch.long)
    slots = torch.arange(B, device=DEV, dtype=torch.long) * S + (S - 1)
    buf = {}

    def fl():
        x = x0
        for L in layers:
            if FUSE["on"]:
                x = layer_decode_fused(x, L, B, S, pos, slots)
            else:
                x = layer_decode(x, L, B, S, pos)
        buf["x"] = x

    def fh():
        head_fn(H, ids, buf["x"])

    with torch.no_grad():
        tl, th, graph = timed(fl, fh, args)
    buf.clear()
    return tl, th, S, graph


def mixed_point(layers, H, n, p, B, C, args):
    S = max(1, C // B)
    dbase = (p + n + 255) // 256 * 256
    x0 = torch.randn(n + B, HIDDEN, device=DEV, dtype=BF)
    ids = torch.randint(0, VOCAB, (n + B,), device=DEV)
    pos = torch.cat((torch.arange(p, p + n, device=DEV), torch.full((B,), S - 1, device=DEV, dtype=torch.long)))
    slots = torch.cat((torch.arange(p, p + n, device=DEV),
                       dbase + torch.arange(B, device=DEV, dtype=torch.long) * S + (S - 1)))
    buf = {}

    def fl():
        x = x0
        for L in layers:
            x = layer_mixed_fused(x, L, n, p, B, S, pos, slots, dbase)
        buf["x"] = x

    def fh():  # sample the prefill's last token and every decode token
        head_fn(H, ids, buf["x"][n - 1:])

    with torch.no_grad():
        tl, th, graph = timed(fl, fh, args)
    buf.clear()
    return tl, th, S, graph


MX_COLS = ["n", "p", "batch", "ctx_tokens", "seq_len", "layers", "layers_s", "head_s", "model_s", "reps",
           "cuda_graph", "layers_min_s", "layers_max_s"]


def run_mixed(out, name, layers, H, points, budget, args):
    w = Writer(os.path.join(out, name), MX_COLS)
    t_end = time.time() + budget
    Lc = len(layers)
    for n, p, B, C in points:
        if time.time() > t_end:
            log(f"{name}: budget spent")
            break
        S = max(1, C // B)
        if (p + n + 255) // 256 * 256 + B * S > min(L.kv_cap for L in layers):
            log(f"mixed n={n} p={p} B={B} C={C}: does not fit the KV pools, skipped")
            continue
        tl, th, S, graph = mixed_point(layers, H, n, p, B, C, args)
        ml, mh = median(tl), median(th)
        tot = mh + ml * LAYERS / Lc
        w.row([n, p, B, B * S, S, Lc, fmt(ml), fmt(mh), fmt(tot), len(tl), graph, fmt(min(tl)), fmt(max(tl))])
        log(f"mixed n={n:6d} p={p:7d} + decode B={B:4d} C={B * S:8d} L={Lc}: layers {ml * 1e3:8.3f} ms"
            f" head {mh * 1e3:6.3f} ms -> model {tot * 1e3:8.3f} ms")
        torch.cuda.empty_cache()


PF_COLS = ["n", "p", "layers", "layers_s", "head_s", "model_s", "reps", "cuda_graph", "layers_min_s",
           "layers_max_s", "eager_layers_s", "eager_head_s", "eager_model_s"]
DC_COLS = ["batch", "ctx_tokens", "seq_len", "layers", "layers_s", "head_s", "model_s", "reps",
           "cuda_graph", "layers_min_s", "layers_max_s"]


def run_prefill(out, name, layers, H, points, budget, args, mode="w"):
    w = Writer(os.path.join(out, name), PF_COLS, mode)
    t_end = time.time() + budget
    Lc = len(layers)
    for n, p in points:
        if time.time() > t_end:
            log(f"{name}: budget spent, {len(points)} points planned")
            break
        if p + n > layers[0].kv_cap or p + n > layers[-1].kv_cap:
            continue
        try:
            tl, th, graph, el, eh = prefill_point(layers, H, n, p, args)
        except torch.cuda.OutOfMemoryError:
            log(f"prefill n={n} p={p}: out of memory, skipped")
            torch.cuda.empty_cache()
            continue
        ml, mh = median(tl), median(th)
        tot = mh + ml * LAYERS / Lc
        eager = ["", "", ""]
        etxt = ""
        if el:
            eml, emh = median(el), median(eh)
            eager = [fmt(eml), fmt(emh), fmt(emh + eml * LAYERS / Lc)]
            etxt = f" (eager {(emh + eml * LAYERS / Lc) * 1e3:9.2f} ms)"
        w.row([n, p, Lc, fmt(ml), fmt(mh), fmt(tot), len(tl), graph, fmt(min(tl)), fmt(max(tl))] + eager)
        log(f"prefill n={n:6d} p={p:7d} L={Lc} graph={graph}: layers {ml * 1e3:9.3f} ms head {mh * 1e3:6.3f} ms"
            f" -> model {tot * 1e3:9.2f} ms{etxt}")
        torch.cuda.empty_cache()


def run_decode(out, name, layers, H, points, budget, args):
    w = Writer(os.path.join(out, name), DC_COLS)
    t_end = time.time() + budget
    Lc = len(layers)
    for B, C in points:
        if time.time() > t_end:
            log(f"{name}: budget spent")
            break
        S = max(1, C // B)
        if B * S > min(L.kv_cap for L in layers):
            continue
        try:
            tl, th, S, graph = decode_point(layers, H, B, C, args)
        except torch.cuda.OutOfMemoryError:
            log(f"decode B={B} C={C}: out of memory, skipped")
            torch.cuda.empty_cache()
            continue
        ml, mh = median(tl), median(th)
        tot = mh + ml * LAYERS / Lc
        w.row([B, B * S, S, Lc, fmt(ml), fmt(mh), fmt(tot), len(tl), graph, fmt(min(tl)), fmt(max(tl))])
        log(f"decode B={B:4d} C={B * S:8d} L={Lc} graph={graph}: layers {ml * 1e3:8.3f} ms"
            f" head {mh * 1e3:6.3f} ms -> model {tot * 1e3:8.3f} ms")
        torch.cuda.empty_cache()


# ---------------------------------------------------------------- checks


def rel(a, b):
    a, b = a.float(), b.float()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def check_triton_moe_only(layer, checks, pairs):
    """The MoE GEMMs with each (gemm1, gemm2) config pair against fp32 expert
    math with the same routing; outputs poisoned with NaN first, so an
    unwritten row fails."""
    def need(name, r, tol):
        checks[name] = r
        if not (r < tol):
            raise SystemExit(f"triton check {name} failed: {r} (tolerance {tol})")

    for c1, c2 in pairs:
        tag = f"BM{c1['BM']}_g1BN{c1['BN']}BK{c1['BK']}w{c1['warps']}s{c1['stages']}" \
              f"_g2BN{c2['BN']}BK{c2['BK']}w{c2['warps']}s{c2['stages']}"
        worst = 0.0
        for Tn in (1, 5, 37, 300):
            h = torch.randn(Tn, HIDDEN, device=DEV, dtype=BF)
            res = torch.randn(Tn, HIDDEN, device=DEV, dtype=BF)
            ids, tw = TK.route(F.linear(h, layer.wr), TOPK)
            n = Tn * TOPK
            srt, eid, npost, cap = TK.align(ids, E, c1["BM"])
            act = torch.full((n, INTER), float("nan"), device=DEV, dtype=BF)
            yb = torch.full((n, HIDDEN), float("nan"), device=DEV, dtype=BF)
            TK.gemm1(h, layer.w13, srt, eid, npost, cap, n, TOPK, c1, out=act)
            TK.gemm2(act, layer.w2, tw.view(-1), srt, eid, npost, cap, n, c2, out=yb)
            out = TK.moe_sum(yb, Tn, TOPK, residual=res)
            ref = moe_reference_routed(h, layer, ids, tw) + res.float()
            r = rel(out, ref) if bool(torch.isfinite(out).all()) else float("nan")
            worst = max(worst, r) if r == r else float("inf")
        need(f"triton_moe_{tag}_rel_err", worst, 2e-2)


def check_triton(layer, checks, cfg_pairs=None):
    """The Triton kernels against float32 references on fresh random inputs.
    Raises SystemExit when one is wrong; records every error in checks."""
    def need(name, r, tol):
        checks[name] = r
        if not (r < tol):
            raise SystemExit(f"triton check {name} failed: {r} (tolerance {tol})")

    # RMSNorm, with and without the residual add
    x = torch.randn(50, HIDDEN, device=DEV, dtype=BF)
    r = torch.randn(50, HIDDEN, device=DEV, dtype=BF)
    w = layer.ln2
    s = x.float() + r.float()
    ref = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + EPS) * w.float()
    xo, y = TK.rmsnorm(x, w, EPS, residual=r)
    need("triton_rmsnorm_res_rel_err", rel(y, ref), 1e-2)
    need("triton_residual_add_rel_err", rel(xo, s), 1e-2)
    xf = x.float()
    need("triton_rmsnorm_rel_err", rel(TK.rmsnorm(x, w, EPS),
                                        xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()), 1e-2)
    # q/k norm + RoPE + KV store, at random positions and distinct slots
    T = 40
    qkv = torch.randn(T, (QH + 2 * KVH) * HD, device=DEV, dtype=BF)
    pos = torch.randint(0, ROPE["cos"].shape[0], (T,), device=DEV)
    slots = torch.randperm(min(layer.kv_cap, 1 << 16), device=DEV)[:T]
    q = TK.qknorm_rope(qkv, layer.qn, layer.kn, layer.kpool, layer.vpool, slots, pos, ROPE["cos"], ROPE["sin"],
                       EPS, QH, KVH, HD, rope=ROPE["on"])

    def ref_nr(t, wt):
        t = t.float()
        t = t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + EPS) * wt.float()
        if not ROPE["on"]:
            return t
        c = ROPE["cos"].float().index_select(0, pos).unsqueeze(1)
        sn = ROPE["sin"].float().index_select(0, pos).unsqueeze(1)
        a, b = t[..., : HD // 2], t[..., HD // 2:]
        return torch.cat((a * c - b * sn, b * c + a * sn), dim=-1)

    qr = ref_nr(qkv[:, : QH * HD].view(T, QH, HD), layer.qn)
    kr = ref_nr(qkv[:, QH * HD:(QH + KVH) * HD].view(T, KVH, HD), layer.kn)
    need("triton_qknorm_rope_q_rel_err", rel(q, qr), 1e-2)
    need("triton_qknorm_rope_k_rel_err", rel(layer.kpool[slots], kr), 1e-2)
    need("triton_kv_store_v_rel_err", rel(layer.vpool[slots], qkv[:, (QH + KVH) * HD:].view(T, KVH, HD)), 1e-6)
    # routing: the chosen probabilities are the top-k values, weights renormalised
    lg = torch.randn(300, E, device=DEV, dtype=BF)
    ids, tw = TK.route(lg, TOPK)
    probs = torch.softmax(lg.float(), dim=-1)
    topv = probs.topk(TOPK, dim=-1).values
    got = probs.gather(1, ids.long()).sort(dim=-1, descending=True).values
    need("triton_route_topk_rel_err", rel(got, topv), 1e-5)
    need("triton_route_weight_rel_err", rel(tw.sort(dim=-1, descending=True).values,
                                             topv / topv.sum(-1, keepdim=True)), 1e-5)
    dup = int((ids.sort(dim=-1).values.diff(dim=-1) == 0).sum())
    need("triton_route_duplicate_experts", float(dup), 0.5)
    # alignment: every pair once, in a block of its own expert; padding is the sentinel
    bms = sorted({c[0]["BM"] for c in (cfg_pairs or [TK.pick(t) for t in (1, 37, 300, 5000)])})
    for Tn in (1, 3, 37, 1000):
        ids = TK.route(torch.randn(Tn, E, device=DEV, dtype=BF), TOPK)[0]
        for BM in bms:
            srt, eid, npost, cap = TK.align(ids, E, BM)
            n = Tn * TOPK
            flat = ids.view(-1).long().cpu()
            cnt = torch.bincount(flat, minlength=E)
            want = int(((cnt + BM - 1) // BM * BM).sum())
            tot = int(npost.item())
            bad = int(tot != want) + int(tot > cap * BM)
            srt_c, eid_c = srt[:tot].cpu().long(), eid[: tot // BM].cpu().long()
            real = srt_c[srt_c < n]
            bad += int(real.numel() != n) + int(torch.unique(real).numel() != n)
            bad += int(((srt_c != n) & (srt_c >= n)).sum())
            blk_e = eid_c.repeat_interleave(BM)
            bad += int((flat[real] != blk_e[srt_c < n]).sum())
            need(f"triton_align_T{Tn}_BM{BM}_errors", float(bad), 0.5)
    check_triton_moe_only(layer, checks, cfg_pairs or [TK.pick(t) for t in (1, 37, 300, 5000)])
    # fused_moe itself (the routing GEMM included) against the grouped-GEMM path
    h = torch.randn(64, HIDDEN, device=DEV, dtype=BF)
    g = moe_grouped(h, layer)
    ids, tw = TK.route(F.linear(h, layer.wr), TOPK)
    need("triton_fused_moe_vs_reference_rel_err",
         rel(TK.fused_moe(h, layer.wr, layer.w13, layer.w2, TOPK), moe_reference_routed(h, layer, ids, tw)), 2e-2)
    checks["triton_fused_moe_vs_grouped_mm_rel_err"] = rel(TK.fused_moe(h, layer.wr, layer.w13, layer.w2, TOPK), g)
    # one whole prefill layer, fused against the torch path (bf16 rounding differs,
    # and a near-tie can route a token elsewhere: a sanity bound, not a tight one)
    kept = MOE["kernel"]
    n, p = 96, 160
    x = torch.randn(n, HIDDEN, device=DEV, dtype=BF)
    pos = torch.arange(p, p + n, device=DEV)
    MOE["kernel"] = "grouped_mm"
    a = layer_prefill(x, layer, p, pos)
    MOE["kernel"] = "triton"
    b = layer_prefill_fused(x, layer, p, pos, pos)
    need("triton_layer_prefill_vs_torch_rel_err", rel(b, a), 0.2)
    x = torch.randn(4, HIDDEN, device=DEV, dtype=BF)
    S = 300
    dpos = torch.full((4,), S - 1, device=DEV, dtype=torch.long)
    slots = torch.arange(4, device=DEV, dtype=torch.long) * S + (S - 1)
    MOE["kernel"] = "grouped_mm"
    a = layer_decode(x, layer, 4, S, dpos)
    MOE["kernel"] = "triton"
    b = layer_decode_fused(x, layer, 4, S, dpos, slots)
    need("triton_layer_decode_vs_torch_rel_err", rel(b, a), 0.2)
    # a mixed forward (prefill chunk + decode batch) against the two parts run apart
    dbase = 512
    xp = torch.randn(n, HIDDEN, device=DEV, dtype=BF)
    dslots = dbase + torch.arange(4, device=DEV, dtype=torch.long) * S + (S - 1)
    a_p = layer_prefill_fused(xp, layer, p, pos, pos)
    a_d = layer_decode_fused(x, layer, 4, S, dpos, dslots, dbase)
    mixed = layer_mixed_fused(torch.cat((xp, x)), layer, n, p, 4, S, torch.cat((pos, dpos)),
                              torch.cat((pos, dslots)), dbase)
    MOE["kernel"] = kept
    need("triton_layer_mixed_vs_apart_rel_err", rel(mixed, torch.cat((a_p, a_d))), 2e-2)
    checks["triton_config_table"] = TK.TABLE["source"]


def run_checks(layer, meta):
    checks = {}
    torch.manual_seed(1)
    # MoE: grouped GEMM path against an fp32 per-token reference
    h = torch.randn(37, HIDDEN, device=DEV, dtype=BF)
    ref = moe_reference(h, layer)
    chosen = MOE["kernel"]
    try:
        got = moe_grouped(h, layer)
        torch.cuda.synchronize()
        r = rel(got, ref)
        checks["moe_grouped_mm_rel_err"] = r
        if not (r < 2e-2):
            raise RuntimeError(f"grouped_mm MoE rel err {r}")
    except Exception as ex:  # noqa: BLE001
        log(f"grouped_mm MoE unusable ({type(ex).__name__}: {ex}); falling back to expert loop")
        checks["moe_grouped_mm_error"] = f"{type(ex).__name__}: {ex}"
        MOE["kernel"] = "loop"
        checks["moe_loop_rel_err"] = rel(moe_loop(h, layer), ref)
    if chosen == "triton":
        MOE["kernel"] = "triton"
    # prefill attention: lower-right causal with GQA, n=96 new after p=160,
    # and n=S=128 (no prefix), in the layer's layout (token-major views)
    ok = None
    for mode in PREFILL_PATHS[ATTN["backend"]]:
        ATTN["prefill"] = mode
        worst = 0.0
        try:
            for n, S in ((96, 256), (128, 128)):
                q, k, v = attn_inputs(n, S)
                r = rel(attn_prefill(q, k, v), attn_reference(q, k, v, causal_offset=True))
                checks[f"prefill_attn_{mode}_rel_err" + ("" if S > n else "_p0")] = r
                worst = max(worst, r)
        except Exception as ex:  # noqa: BLE001
            checks[f"prefill_attn_{mode}_error"] = f"{type(ex).__name__}: {ex}"
            continue
        if worst < 2e-2:
            ok = mode
            break
    if ok is None:
        raise SystemExit(f"no {ATTN['backend']} prefill attention path passed its check")
    if not ok.startswith("flash"):
        # the chosen path against FlashAttention-2 at a larger shape
        q, k, v = attn_inputs(1536, 1536 + 5000)
        got = attn_prefill(q, k, v)
        ATTN["prefill"] = "flash_gqa"
        r = rel(got, attn_prefill(q, k, v))
        ATTN["prefill"] = ok
        checks[f"prefill_attn_{ok}_vs_flash_rel_err_n1536_p5000"] = r
        if not (r < 2e-2):
            raise SystemExit(f"{ok} disagrees with flash at n=1536 p=5000: {r}")
    # decode attention: grouped-query packing against the reference
    B, S = 5, 300
    q = torch.randn(B, QH, HD, device=DEV, dtype=BF)
    k = torch.randn(B, KVH, S, HD, device=DEV, dtype=BF)
    v = torch.randn(B, KVH, S, HD, device=DEV, dtype=BF)
    ref = attn_reference(q.unsqueeze(2), k, v, causal_offset=None).reshape(B, QH * HD)
    r = rel(attn_decode(q, k, v), ref)
    checks["decode_attn_rel_err"] = r
    if not (r < 2e-2):
        raise SystemExit(f"decode attention check failed: {r}")
    if MOE["kernel"] == "triton" or FUSE["on"]:
        check_triton(layer, checks)
    checks["moe_kernel"] = MOE["kernel"]
    checks["prefill_attn_backend"] = ATTN["backend"]
    checks["prefill_attn_kernel"] = ATTN["prefill"]
    meta["checks"] = checks
    log("checks", json.dumps(checks))


# ---------------------------------------------------------------- grids


def pow2_half(lo, hi):
    out, k = [], 0
    while True:
        v = int(round(lo * 2 ** (k / 2) / 64)) * 64 if k else lo
        if v > hi:
            break
        out.append(v)
        k += 1
    return out


def ordered(points, coarse):
    # coarse grid first (so a cut run still spans the grid), each level by cost
    lv0 = [pt for pt in points if coarse(pt)]
    lv1 = [pt for pt in points if not coarse(pt)]
    return lv0 + lv1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--smoke", action="store_true", help="tiny grids to catch errors")
    ap.add_argument("--prefill-layers", type=int, default=4, help="layers timed for prefill (scaled by 48/L)")
    ap.add_argument("--decode-layers", type=int, default=8, help="layers timed for decode (scaled by 48/L)")
    ap.add_argument("--validate-layers", type=int, default=48, help="layers for the scaling check (0: none)")
    ap.add_argument("--kv-cap", type=int, default=(1 << 20) + 256, help="KV pool tokens of the first layers")
    ap.add_argument("--val-kv-cap", type=int, default=(1 << 18) + 256, help="KV pool tokens of the other layers")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--min-reps", type=int, default=5)
    ap.add_argument("--max-reps", type=int, default=25)
    ap.add_argument("--target-s", type=float, default=0.25, help="aim for this much timed work per point")
    ap.add_argument("--copy-reps", type=int, default=10)
    ap.add_argument("--no-graphs", dest="graphs", action="store_false", help="no CUDA graphs: eager only")
    ap.add_argument("--eager-below-s", type=float, default=0.05,
                    help="also time prefill eagerly where the graph took less than this (s, for L layers)")
    ap.add_argument("--no-rope", action="store_true")
    ap.add_argument("--attn-prefill", choices=sorted(PREFILL_PATHS), default="flash",
                    help="prefill attention backend: flash (FlashAttention-2, the default) or cudnn "
                         "(cuDNN SDPA); run_checks picks the first path of it that matches the reference")
    ap.add_argument("--kernels", choices=("torch", "triton"), default="torch",
                    help="torch (the default, the earlier runs): grouped-GEMM MoE and PyTorch elementwise ops; "
                         "triton: the fused MoE and fused norm/RoPE kernels of calibration/triton_kernels.py")
    ap.add_argument("--moe-configs", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                        "moe_configs_h200.json"),
                    help="block-size table for --kernels triton (from calibration/moe_tune.py); "
                         "built-in defaults when the file is missing")
    ap.add_argument("--decode-points", default="", help="comma list B:C replacing the decode grid")
    ap.add_argument("--prefill-points", default="", help="comma list n:p replacing the prefill grid")
    ap.add_argument("--mixed-points", default="",
                    help="comma list n:p:B:C of mixed steps (a prefill chunk and a decode batch in one forward; "
                         "--kernels triton only), timed with the prefill layers into mixed.csv")
    ap.add_argument("--router-noise", type=float, default=4.0,
                    help="std of the per-layer router-logit offset in the extra scaling check (0: skip it)")
    ap.add_argument("--budget-copy", type=float, default=40)
    ap.add_argument("--budget-decode", type=float, default=110)
    ap.add_argument("--budget-prefill", type=float, default=230)
    ap.add_argument("--budget-validate", type=float, default=70)
    ap.add_argument("--skip", default="", help="comma list of phases to skip: copy,decode,prefill,validate")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    skip = set(s for s in args.skip.split(",") if s)
    ROPE["on"] = not args.no_rope
    ATTN["backend"] = args.attn_prefill
    if args.kernels == "triton":
        global TK
        import triton_kernels as TK  # noqa: E402 (needs triton; only for this option)
        if os.path.exists(args.moe_configs):
            TK.load_table(args.moe_configs)
        MOE["kernel"] = "triton"
        FUSE["on"] = True
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False

    meta = {"script": "calibration/measure.py", "argv": sys.argv[1:], "started_unix": time.time()}
    free, total = torch.cuda.mem_get_info(0)
    props = torch.cuda.get_device_properties(0)
    meta.update({
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(), "python": platform.python_version(),
        "device_count": torch.cuda.device_count(), "device_name": props.name,
        "sm_count": props.multi_processor_count, "capability": f"{props.major}.{props.minor}",
        "total_memory_props": props.total_memory,
        "mem_get_info_free": free, "mem_get_info_total": total,
        "l2_cache_bytes": getattr(props, "L2_cache_size", None),
        "has_grouped_mm": hasattr(torch, "_grouped_mm"),
        "attn_prefill": args.attn_prefill,
        "kernels": args.kernels,
    })
    if args.kernels == "triton":
        import triton
        meta["triton"] = triton.__version__
        meta["moe_config_table"] = {"source": TK.TABLE["source"],
                                    "table": {str(k): v for k, v in TK.TABLE["table"].items()}}
    try:
        meta["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,"
             "power.limit,temperature.gpu", "--format=csv"],
            capture_output=True, text=True, timeout=20).stdout.strip()
        meta["nvidia_smi_topo"] = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True,
                                                 timeout=20).stdout.strip()
    except Exception as ex:  # noqa: BLE001
        meta["nvidia_smi"] = f"unavailable: {ex}"
    meta_path = os.path.join(args.out, "meta.json")

    def save_meta():
        meta["elapsed_s"] = time.time() - T0
        with open(meta_path, "w") as f:
            json.dump(meta, f, indent=2, default=str)

    save_meta()
    log(json.dumps({k: meta[k] for k in ("torch", "cuda", "device_name", "sm_count", "mem_get_info_total",
                                          "mem_get_info_free", "device_count")}))

    if "copy" not in skip:
        run_copies(args.out, args, meta)
        save_meta()

    # model
    if args.smoke:
        args.kv_cap = min(args.kv_cap, (1 << 17) + 256)
        args.val_kv_cap = min(args.val_kv_cap, 20000)
    n_main = max(args.prefill_layers, args.decode_layers)
    n_alloc = max(n_main, args.validate_layers)
    gen = torch.Generator(device=DEV)
    gen.manual_seed(1234)
    global ARANGE_E
    ARANGE_E = torch.arange(E, device=DEV)
    build_rope(max(args.kv_cap, args.val_kv_cap) + 1)
    t = time.time()
    layers = [Layer(gen, args.kv_cap if i < n_main else args.val_kv_cap, i) for i in range(n_alloc)]
    H = Head(gen)
    torch.cuda.synchronize()
    free2, _ = torch.cuda.mem_get_info(0)
    meta["alloc"] = {"layers": n_alloc, "seconds": time.time() - t, "mem_free_after": free2,
                     "kv_cap_main": args.kv_cap, "kv_cap_other": args.val_kv_cap}
    log(f"allocated {n_alloc} layers + head in {time.time() - t:.1f}s; free {free2 / 2**30:.1f} GiB")
    run_checks(layers[0], meta)
    save_meta()

    # grids
    batches = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128]
    ctxs = pow2_half(1024, 1 << 20)  # 1K .. 1M, half-octave steps
    ns = pow2_half(128, 32768)  # 128 .. 32K, half-octave steps
    ps = [0, 512, 1024, 2048, 4096, 8192, 16384, 24576, 32768, 49152, 65536, 98304, 131072]
    if args.smoke:
        batches, ctxs = [1, 16, 128], [4096, 131072]
        ns, ps = [128, 2048, 8192], [0, 16384]
    dpts = [(B, C) for B in batches for C in ctxs if C >= B]
    dpts = ordered(sorted(dpts, key=lambda bc: bc[1] + 2000 * bc[0]),
                   lambda bc: bc[0] in (1, 4, 16, 64, 128) and ctxs.index(bc[1]) % 4 == 0)
    ppts = [(n, p) for n in ns for p in ps]
    ppts = ordered(sorted(ppts, key=lambda np_: np_[0] * (np_[1] + np_[0] / 2) + 3e4 * np_[0]),
                   lambda np_: ns.index(np_[0]) % 2 == 0 and ps.index(np_[1]) % 2 == 0)
    if args.decode_points:
        dpts = [tuple(int(v) for v in s.split(":")) for s in args.decode_points.split(",")]
    if args.prefill_points:
        ppts = [tuple(int(v) for v in s.split(":")) for s in args.prefill_points.split(",")]
    meta["grids"] = {"decode": dpts, "prefill": ppts}
    save_meta()

    if "decode" not in skip:
        run_decode(args.out, "decode.csv", layers[:args.decode_layers], H, dpts, args.budget_decode, args)
        save_meta()
    if "prefill" not in skip:
        run_prefill(args.out, "prefill.csv", layers[:args.prefill_layers], H, ppts, args.budget_prefill, args)
        save_meta()
    if "validate" not in skip and args.validate_layers > 0:
        VL = layers[:args.validate_layers]
        vd = [(1, 4096), (1, 65536), (16, 65536), (64, 16384), (128, 4096), (128, 262144)]
        vp = [(128, 0), (512, 0), (2048, 8192), (8192, 0), (4096, 32768), (8192, 32768)]
        if args.smoke:
            vd, vp = [(16, 16384)], [(2048, 8192)]
        vd = [(B, C) for B, C in vd if C <= args.val_kv_cap - 256]
        vp = [(n, p) for n, p in vp if n + p <= args.val_kv_cap]
        if vd:  # the main grids hold the same points, timed with fewer layers
            run_decode(args.out, "decode_l48.csv", VL, H, vd, args.budget_validate / 2, args)
        run_prefill(args.out, "prefill_l48.csv", VL, H, vp, args.budget_validate / 2, args)
        save_meta()
        if args.router_noise > 0:
            # A deep stack of random layers collapses the tokens of one prompt
            # onto nearly the same hidden state, so deep layers route a whole
            # prompt to few experts (a real model does not). Count the distinct
            # experts per layer for n=128 new tokens, then time the small-n
            # points again with a fixed random offset on every layer's router
            # logits, with L and 48 layers.
            g2 = torch.Generator(device=DEV)
            g2.manual_seed(99)
            nmax = max(n for n, _ in vp)
            noise = [args.router_noise * torch.randn(nmax, E, device=DEV, generator=g2) for _ in VL]
            diag = {}
            for label, nz in (("no_offset", None), (f"offset_std_{args.router_noise:g}", noise)):
                ROUTER["noise"] = nz
                ROUTER["record"] = []
                with torch.no_grad():
                    x = torch.randn(128, HIDDEN, device=DEV, dtype=BF)
                    pos = torch.arange(128, device=DEV)
                    for L in VL:
                        if FUSE["on"]:
                            x = layer_prefill_fused(x, L, 0, pos, pos)
                        else:
                            x = layer_prefill(x, L, 0, pos)
                diag[label] = ROUTER["record"]
                ROUTER["record"] = None
            meta["distinct_experts_per_layer_n128"] = diag
            log("distinct experts per layer, n=128:", json.dumps(diag))
            ROUTER["noise"] = noise
            small = [(n, p) for n, p in vp if n <= 2048]
            w_pts = small
            run_prefill(args.out, "prefill_l48_offset.csv", VL[:args.prefill_layers], H, w_pts,
                        args.budget_validate / 4, args)
            run_prefill(args.out, "prefill_l48_offset.csv", VL, H, w_pts, args.budget_validate / 4, args, mode="a")
            ROUTER["noise"] = None
            save_meta()
    if args.mixed_points and FUSE["on"]:
        mpts = [tuple(int(v) for v in s.split(":")) for s in args.mixed_points.split(",")]
        meta["grids"]["mixed"] = mpts
        run_mixed(args.out, "mixed.csv", layers[:args.prefill_layers], H, mpts, 1e9, args)
        save_meta()
    meta["finished"] = True
    save_meta()
    log("done")


if __name__ == "__main__":
    main()

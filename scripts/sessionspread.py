#!/usr/bin/env python3
"""New sessions and requests per worker, and TTFT p50/p99, of sim run folders
(docs/kvc.md, "New sessions sharing a system prompt"):

    scripts/sessionspread.py RUN_DIR...
"""
import json,sys,collections
for d in sys.argv[1:]:
    t1=collections.Counter(); allr=collections.Counter(); ttft=[]; comp=0; n=0
    for l in open(d+'/metrics.jsonl'):
        r=json.loads(l); n+=1
        w=r.get('decode_worker') or r.get('prefill_worker') or '-'
        if r.get('execution_mode','').endswith('whole-on-p'): w=r.get('prefill_worker','P')
        allr[w]+=1
        if r['turn']==1: t1[w]+=1
        if r['status']=='completed':
            comp+=1
            if r['ttft_s'] is not None: ttft.append(r['ttft_s'])
    ttft.sort()
    p=lambda q: ttft[min(len(ttft)-1,int(len(ttft)*q))] if ttft else float('nan')
    print(f"{d}: requests {n} completed {comp}; new sessions per worker {dict(sorted(t1.items()))}; requests per worker {dict(sorted(allr.items()))}; TTFT p50 {p(.5):.2f} s p99 {p(.99):.2f} s")

#!/usr/bin/env python3
"""Does a paged KV pool read slower once its blocks are scattered?

vLLM's block pool hands out free blocks from the head of one queue and puts
a finished request's blocks back at its tail (vllm/v1/core/block_pool.py,
FreeKVCacheBlockQueue), so a request's blocks start out in order in a fresh
pool and end up spread over the whole pool after a few pool turnovers. This
times one decode step's KV reads, every layer's K and V for a batch of 128
sequences of 1,034-2,482 tokens (the reasoning runs), gathered 16-token
block by block from a pool the size vLLM logged (index_select of each
block's row, as the attention kernel reads them), for three layouts of the
same blocks:

  contiguous   each sequence's blocks consecutive (a fresh pool, prefill)
  interleaved  block j of sequence r at j*128 + r (decode in lockstep in a
               fresh pool: each step takes one block for every 16th sequence)
  scattered    a random sample of the whole pool in random order (a pool
               mixed by many turnovers)

Shapes: Llama-2-70B at TP4 (80
layers, 2 KV heads a GPU, 31,356 blocks) and Mixtral-8x7B at TP2 (32
layers, 4 KV heads, 27,510 blocks), head dim 128, bf16.
"""
# Prints one line per shape and layout: blocks read, the step's time (median
# of 15 after 3 warm-ups, CUDA events) and the read bandwidth (the gathered
# rows are written too, contiguously, the same in every layout).
import torch,statistics as st
d='cuda';g=torch.Generator().manual_seed(1)
def tm(f):
 s,e=torch.cuda.Event(True),torch.cuda.Event(True)
 for _ in range(3):f()
 torch.cuda.synchronize();r=[]
 for _ in range(15):
  s.record();f();e.record();e.synchronize();r.append(s.elapsed_time(e)/1e3)
 return st.median(r)
for nm,L,H,N in[("70b-tp4",80,2,31356),("mixtral-tp2",32,4,27510)]:
 R=16*H*128;kv=[torch.randn((2,N,R),dtype=torch.bfloat16,device=d) for _ in range(L)]
 cb=[(c+15)//16 for c in torch.randint(1034,2483,(128,),generator=g).tolist()];T=sum(cb)
 o=torch.empty((T,R),dtype=torch.bfloat16,device=d)
 al=[(r,j) for j in range(max(cb)) for r in range(128) if j<cb[r]];p={x:i for i,x in enumerate(al)}
 lay={"contiguous":torch.arange(T),"interleaved":torch.tensor([p[(r,j)] for r in range(128) for j in range(cb[r])]),"scattered":torch.randperm(N,generator=g)[:T]}
 B=2*L*T*R*2
 for k,ix in lay.items():
  ix=ix.to(d)
  def f():
   for t in kv:
    torch.index_select(t[0],0,ix,out=o);torch.index_select(t[1],0,ix,out=o)
  s=tm(f);print(nm,k,T,"blocks",f"{s*1e3:.3f} ms",f"{B/s/1e9:.0f} GB/s",flush=True)
 del kv,o;torch.cuda.empty_cache()

#!/usr/bin/env python3
"""A canonical trace of new sessions sharing one system prompt (docs/kvc.md,
"New sessions sharing a system prompt"): 192 sessions, one every 0.5 s, each
a 2,048-token (32-block) system prompt every session shares and 1,024 tokens
of its own, then four more turns 20 s apart appending 512 tokens each.

    scripts/sysprompt_trace.py > sysprompt.jsonl
"""
import json
import sys

out = sys.stdout
out.write(json.dumps({"pdhybrid_trace": 1, "block_size": 64, "source": "synthetic",
                      "note": "192 sessions sharing a 32-block system prompt"}) + "\n")
system = list(range(1, 33))
recs, cid = [], 0
for s in range(192):
    blocks = system + [100000 + s * 1000 + i for i in range(16)]
    t = s * 0.5
    for turn in range(1, 6):
        recs.append({"session_id": f"s{s}", "chat_id": cid, "parent_chat_id": cid - 1 if turn > 1 else -1,
                     "turn": turn, "timestamp": t, "input_length": len(blocks) * 64, "output_length": 200,
                     "type": "n", "hash_ids": list(blocks)})
        cid += 1
        blocks = blocks + [100000 + s * 1000 + 100 + turn * 10 + i for i in range(8)]
        t += 20
recs.sort(key=lambda r: r["timestamp"])
for r in recs:
    out.write(json.dumps(r) + "\n")

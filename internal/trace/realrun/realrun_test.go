package realrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const meta = `{"experiment": "x", "model_id": "org/m", "server": {"tensor_parallelism": 2, "max_num_seqs": 128, "max_num_batched_tokens": 2048, "kv_blocks_total_gpu": 100, "block_size": 16},
 "client": {"data": {"type": "shared_prefix", "shared_prefix": {"num_groups": 2, "num_prompts_per_group": 2, "system_prompt_len": 40, "question_len": 20, "output_len": 7}}, "ignore_eos": true},
 "exp_config": {"max_model_len": 4096}, "n_requests": 6, "n_ok": 5}`

func write(t *testing.T, csv string) string {
	t.Helper()
	dir := t.TempDir()
	base := filepath.Join(dir, "run")
	if err := os.WriteFile(base+".meta.json", []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".csv", []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	return base + ".csv"
}

const good = `index,arrival_s,input_tokens,output_tokens,has_error,ttft_s,e2e_s
0,0.0,63,7,0,0.05,0.5
1,0.1,64,7,0,0.04,0.4
2,0.2,62,5,0,0.03,0.3
3,0.3,65,7,0,0.03,0.3
4,0.4,63,7,0,0.03,0.3
5,0.5,0,0,1,,
`

// Request k sends prompt k mod 4: requests 0 and 4 share every full block;
// the prompts of one group share the 41-token prefix's two full blocks;
// a partial last block is never shared; a failed request sends its
// prompt's length; output is the workload's output_len.
func TestTracePromptIdentity(t *testing.T) {
	r, err := Load(write(t, good))
	if err != nil {
		t.Fatal(err)
	}
	h, reqs := r.Trace(Options{})
	if h.BlockSize != 16 || !strings.Contains(h.Note, "prompt k mod 4") {
		t.Fatalf("header %+v", h)
	}
	if len(reqs) != 6 || reqs[5].InputLength != 64 || reqs[2].OutputLength != 7 {
		t.Fatalf("failed request's input %d (want prompt 1's 64), output %d (want 7)", reqs[5].InputLength, reqs[2].OutputLength)
	}
	a, b := reqs[0].HashIDs, reqs[4].HashIDs
	if len(a) != 4 || a[0] != b[0] || a[1] != b[1] || a[2] != b[2] || a[3] == b[3] {
		t.Fatalf("prompt 0 twice: %v and %v; want the 3 full blocks equal, the partial last one apart", a, b)
	}
	if q := reqs[1].HashIDs; len(q) != 4 || q[3] == a[3] || q[2] == a[2] {
		t.Fatalf("prompt 1 (64 tokens, 4 full blocks) %v against prompt 0 %v", q, a)
	}
	// Two of the three other prompts are in another group than prompt 0's
	// and share no block with it; the one in its group shares two.
	same := 0
	for _, q := range reqs[1:4] {
		if q.HashIDs[0] == a[0] {
			same++
			if q.HashIDs[1] != a[1] || q.HashIDs[2] == a[2] {
				t.Fatalf("same group: %v vs %v", q.HashIDs, a)
			}
		}
	}
	if same != 1 {
		t.Fatalf("%d other prompts in prompt 0's group, want 1 (groups of 2)", same)
	}
	for _, q := range reqs {
		for _, id := range q.HashIDs {
			if id >= 1<<53 {
				t.Fatalf("block id %d not exact as a double", id)
			}
		}
	}
}

func TestLoadErrors(t *testing.T) {
	for _, c := range []struct{ csv, want string }{
		{"index,arrival,input_tokens,output_tokens,has_error,ttft_s,e2e_s\n", `column 2 is "arrival"`},
		{"index,arrival_s,input_tokens,output_tokens,has_error,ttft_s,e2e_s\n0,1,10,1,0,x,1\n", "run.csv:2: ttft_s"},
		{"index,arrival_s,input_tokens,output_tokens,has_error,ttft_s,e2e_s\n0,1,10,1,0,1,1\n1,0.5,10,1,0,1,1\n", "run.csv:3: arrival_s 0.5 before"},
		{"index,arrival_s,input_tokens,output_tokens,has_error,ttft_s,e2e_s\n0,1,0,1,0,1,1\n", "input_tokens = 0 for a request that completed"},
	} {
		_, err := Load(write(t, c.csv))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.csv, err, c.want)
		}
	}
}

// The sixteen real runs load, and every run's request k mostly repeats the
// input length of request k − N (the cycling assumption).
func TestRealRunsCycle(t *testing.T) {
	files, _ := filepath.Glob("../../../../shared/realruns/runs/*.csv")
	if len(files) == 0 {
		t.Skip("../shared/realruns absent (a fresh clone has no ../shared)")
	}
	for _, f := range files {
		r, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		sp := r.Meta.Client.Data.SharedPrefix
		n := sp.Groups * sp.PromptsPerGroup
		same, all := 0, 0
		for k := n; k < len(r.Requests); k++ {
			a, b := r.Requests[k], r.Requests[k-n]
			if a.InputTokens > 0 && b.InputTokens > 0 {
				all++
				if a.InputTokens == b.InputTokens {
					same++
				}
			}
		}
		if float64(same) < 0.97*float64(all) {
			t.Errorf("%s: %d of %d requests repeat the length of the one %d before, want ≥ 97 %%", r.Name, same, all, n)
		}
	}
}

// Package realrun reads a real serving run of the kind ../shared/realruns
// holds (one vLLM server driven by the inference-perf client: a per-request
// CSV and its meta.json) and turns it into a canonical trace, keeping the
// measured latencies beside it for validation.
//
// The files carry lengths, not token ids, so prompt identity is rebuilt from
// the client's workload. inference-perf's shared_prefix generator makes
// num_groups × num_prompts_per_group prompts (a group's system prompt plus a
// question each), shuffles them, and hands them out in a cycle; request k
// therefore sends prompt k mod N (N = groups × prompts; in the sixteen runs
// 98–99.7 % of requests have the input length of the request N before).
// Which group each prompt belongs to is lost in the shuffle: the converter
// assigns prompts to groups by a fixed permutation (an assumption, stated in
// the trace's note). A prompt's first (1 + system_prompt_len) / block_size
// blocks (BOS and the system prompt) are its group's, the rest its own,
// and its partial last block is the request's alone, as vLLM caches full
// blocks only. Output lengths are the client's output_len (ignore_eos was
// set; some runs record fewer tokens than the server generated).
package realrun

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// Meta is the part of a run's meta.json the converter and validation use.
type Meta struct {
	Experiment string `json:"experiment"`
	ModelID    string `json:"model_id"`
	Server     struct {
		TP               int   `json:"tensor_parallelism"`
		MaxNumSeqs       int   `json:"max_num_seqs"`
		MaxBatchedTokens int   `json:"max_num_batched_tokens"`
		KVBlocks         int64 `json:"kv_blocks_total_gpu"`
		BlockSize        int   `json:"block_size"`
	} `json:"server"`
	Client struct {
		Data struct {
			Type         string `json:"type"`
			SharedPrefix *struct {
				Groups          int `json:"num_groups"`
				PromptsPerGroup int `json:"num_prompts_per_group"`
				SystemPromptLen int `json:"system_prompt_len"`
				QuestionLen     int `json:"question_len"`
				OutputLen       int `json:"output_len"`
			} `json:"shared_prefix"`
		} `json:"data"`
		Load struct {
			Stages []struct {
				Rate     float64 `json:"rate"`
				Duration float64 `json:"duration"`
			} `json:"stages"`
		} `json:"load"`
		IgnoreEOS bool `json:"ignore_eos"`
	} `json:"client"`
	ExpConfig struct {
		MaxModelLen int `json:"max_model_len"`
	} `json:"exp_config"`
	NRequests int `json:"n_requests"`
	NOK       int `json:"n_ok"`
}

// Request is one CSV line.
type Request struct {
	Index        int
	ArrivalS     float64
	InputTokens  int
	OutputTokens int
	OK           bool
	TTFTS, E2ES  float64 // NaN when the request failed
}

// Run is one experiment.
type Run struct {
	Name     string
	Meta     Meta
	Requests []Request
}

// Paths gives a run's CSV and meta.json from either file's path or the
// experiment's path without extension.
func Paths(path string) (csvPath, metaPath string) {
	base := strings.TrimSuffix(strings.TrimSuffix(path, ".csv"), ".meta.json")
	return base + ".csv", base + ".meta.json"
}

// Load reads a run.
func Load(path string) (*Run, error) {
	cp, mp := Paths(path)
	mb, err := os.ReadFile(mp)
	if err != nil {
		return nil, err
	}
	r := &Run{Name: strings.TrimSuffix(filepath.Base(cp), ".csv")}
	if err := json.Unmarshal(mb, &r.Meta); err != nil {
		return nil, fmt.Errorf("%s: %w", mp, err)
	}
	if err := r.Meta.check(mp); err != nil {
		return nil, err
	}
	f, err := os.Open(cp)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r.Requests, err = readCSV(f, cp)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (m *Meta) check(path string) error {
	sp := m.Client.Data.SharedPrefix
	switch {
	case sp == nil:
		return fmt.Errorf("%s: client.data.shared_prefix missing: only the shared_prefix workload is understood", path)
	case sp.Groups <= 0 || sp.PromptsPerGroup <= 0:
		return fmt.Errorf("%s: client.data.shared_prefix: num_groups %d × num_prompts_per_group %d, expected both > 0", path, sp.Groups, sp.PromptsPerGroup)
	case sp.OutputLen <= 0:
		return fmt.Errorf("%s: client.data.shared_prefix.output_len %d, expected > 0", path, sp.OutputLen)
	case m.Server.TP <= 0:
		return fmt.Errorf("%s: server.tensor_parallelism %d, expected > 0", path, m.Server.TP)
	}
	if m.Server.BlockSize <= 0 {
		m.Server.BlockSize = 16
	}
	return nil
}

var header = []string{"index", "arrival_s", "input_tokens", "output_tokens", "has_error", "ttft_s", "e2e_s"}

func readCSV(r io.Reader, path string) ([]Request, error) {
	cr := csv.NewReader(bufio.NewReader(r))
	cr.FieldsPerRecord = len(header)
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s:1: %w", path, err)
	}
	for i, h := range header {
		if strings.TrimSpace(head[i]) != h {
			return nil, fmt.Errorf("%s:1: column %d is %q, expected %q (header %s)", path, i+1, head[i], h, strings.Join(header, ","))
		}
	}
	var out []Request
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		q, err := parseRow(rec)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if n := len(out); n > 0 && q.ArrivalS < out[n-1].ArrivalS {
			return nil, fmt.Errorf("%s:%d: arrival_s %v before the previous line's %v, expected arrival order", path, line, q.ArrivalS, out[n-1].ArrivalS)
		}
		out = append(out, q)
	}
	return out, nil
}

func parseRow(rec []string) (Request, error) {
	var q Request
	var err error
	field := func(i int) string { return strings.TrimSpace(rec[i]) }
	num := func(i int) float64 {
		if err != nil {
			return 0
		}
		var v float64
		v, err = strconv.ParseFloat(field(i), 64)
		if err != nil || math.IsNaN(v) || v < 0 {
			err = fmt.Errorf("%s = %q, expected a number ≥ 0", header[i], field(i))
		}
		return v
	}
	q.Index = int(num(0))
	q.ArrivalS = num(1)
	q.InputTokens = int(num(2))
	q.OutputTokens = int(num(3))
	he := num(4)
	if err != nil {
		return q, err
	}
	q.OK = he == 0
	q.TTFTS, q.E2ES = math.NaN(), math.NaN()
	if q.OK {
		q.TTFTS, q.E2ES = num(5), num(6)
		if err != nil {
			return q, err
		}
	}
	if q.InputTokens <= 0 && q.OK {
		return q, fmt.Errorf("input_tokens = %d for a request that completed, expected > 0", q.InputTokens)
	}
	return q, nil
}

// Options are the converter's choices.
type Options struct {
	// Seed chooses the permutation that assigns prompts to groups.
	Seed uint64
}

// Note states the trace's assumptions.
func (r *Run) Note(o Options) string {
	sp := r.Meta.Client.Data.SharedPrefix
	return fmt.Sprintf("realrun %s: request k sends prompt k mod %d (inference-perf cycles its shuffled prompts); prompts assigned to %d groups of %d by permutation seed %d (the run does not record it); %d shared blocks of %d tokens per group (BOS + %d-token system prompt), the partial last block unshared; output %d tokens (ignore_eos)",
		r.Name, sp.Groups*sp.PromptsPerGroup, sp.Groups, sp.PromptsPerGroup, o.Seed, (1+sp.SystemPromptLen)/r.Meta.Server.BlockSize, r.Meta.Server.BlockSize, sp.SystemPromptLen, sp.OutputLen)
}

// Trace converts the run's requests, in arrival order, one session each.
func (r *Run) Trace(o Options) (trace.Header, []trace.Request) {
	sp := r.Meta.Client.Data.SharedPrefix
	bs := r.Meta.Server.BlockSize
	n := sp.Groups * sp.PromptsPerGroup
	group := groupOf(n, sp.Groups, o.Seed)
	shared := (1 + sp.SystemPromptLen) / bs
	h := trace.Header{Version: trace.FormatVersion, BlockSize: bs, Source: "realrun", Note: r.Note(o)}
	// A failed request records no lengths: it sent its prompt's, known
	// from the requests with the same prompt, else the workload's.
	length := make([]int, n)
	for _, q := range r.Requests {
		if q.InputTokens > 0 {
			length[q.Index%n] = q.InputTokens
		}
	}
	out := make([]trace.Request, len(r.Requests))
	for i, q := range r.Requests {
		p := q.Index % n
		if q.InputTokens <= 0 {
			q.InputTokens = cmp.Or(length[p], 1+sp.SystemPromptLen+1+sp.QuestionLen)
		}
		nb := trace.BlocksFor(q.InputTokens, bs)
		ids := make([]uint64, nb)
		for j := range ids {
			switch {
			case j == nb-1 && q.InputTokens%bs != 0:
				ids[j] = blockID(3, q.Index, 0)
			case j < shared:
				ids[j] = blockID(1, group[p], j)
			default:
				ids[j] = blockID(2, p, j)
			}
		}
		out[i] = trace.Request{
			SessionID: "r" + strconv.Itoa(q.Index), ChatID: int64(q.Index), ParentChatID: -1, Turn: 1,
			Timestamp: q.ArrivalS, InputLength: q.InputTokens, OutputLength: sp.OutputLen,
			Type: "text", HashIDs: ids,
		}
	}
	return h, out
}

// blockID packs a block's kind (1 a group's system prompt, 2 a prompt's
// own, 3 a request's partial last block), owner and position below 2⁵³,
// so that the ids survive tools that read JSON numbers as doubles.
func blockID(kind, owner, pos int) uint64 {
	return uint64(kind)<<50 | uint64(owner)<<16 | uint64(pos&0xffff)
}

// groupOf assigns n prompts to groups of equal size by a permutation drawn
// with a small deterministic generator (splitmix64).
func groupOf(n, groups int, seed uint64) []int {
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	s := seed
	next := func() uint64 {
		s += 0x9e3779b97f4a7c15
		z := s
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return z ^ z>>31
	}
	for i := n - 1; i > 0; i-- {
		j := int(next() % uint64(i+1))
		perm[i], perm[j] = perm[j], perm[i]
	}
	per := max(n/groups, 1)
	g := make([]int, n)
	for slot, p := range perm {
		g[p] = min(slot/per, groups-1)
	}
	return g
}

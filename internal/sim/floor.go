package sim

import (
	"errors"
	"io"
	"sort"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/model"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// The latency floor of a workload: what no mechanism on this engine model
// can beat. Each request is served alone on an idle GPU whose prefix cache
// holds everything it could: every block any earlier request sent, and the
// session's previous output where the prompt continues it (output reuse
// "all"). Its TTFT floor is the chunked prefill of the rest; its e2e floor
// adds one decode step per further output token, at batch one. A mechanism
// can only queue, miss the cache, move KV or share a batch on top of that,
// so a target below the floor (a TTFT p50 half of DP's, say) is out of
// reach for every router.

// FloorStats is the floor's distribution over the requests the simulator
// would complete (prompts within the context length).
type FloorStats struct {
	Requests int     `json:"requests"`
	Skipped  int     `json:"skipped_too_long"`
	TTFT     Quartet `json:"ttft_s"`
	E2E      Quartet `json:"e2e_s"`
	// Uncached is the share of prompt tokens the ideal cache misses.
	Uncached float64 `json:"uncached_share"`
}

// Quartet is a distribution's mean, p50, p90 and p99 (numpy's linear
// percentiles, as summary.json reports them).
type Quartet struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
}

func quartet(xs []float64) Quartet {
	if len(xs) == 0 {
		return Quartet{}
	}
	xs = append([]float64(nil), xs...)
	sort.Float64s(xs)
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return Quartet{Mean: sum / float64(len(xs)), P50: metrics.Percentile(xs, 50),
		P90: metrics.Percentile(xs, 90), P99: metrics.Percentile(xs, 99)}
}

// floorTurn is what the ideal cache keeps of a session's last turn.
type floorTurn struct {
	blocks []uint64 // its prompt's block ids
	input  int
	output int
}

// floorBlock is where a block is sent in the whole workload: the index of
// its first request, and whether more than one session sends it.
type floorBlock struct {
	first   int32
	session string
	shared  bool
}

// Floor returns the latency floor of the workload open yields (it reads
// it twice) on profile p. chunk is the prefill chunk (0 = the profile's);
// maxInput the context length (0 = the model's), past which a request
// fails and is skipped.
//
// The ideal cache is generous so that the floor stays a floor under any
// replay order: a block counts as cached for a request when any other
// session sends it anywhere in the workload (a closed-loop replay can move
// another session's turn ahead of this one), or an earlier turn of the same
// session sent it (a session's turns keep their order).
func Floor(open func() (Source, error), p *model.Profile, chunk, maxInput int) (FloorStats, error) {
	f, err := floorSamples(open, p, chunk, maxInput)
	if err != nil {
		return FloorStats{}, err
	}
	st := FloorStats{Requests: len(f.ttft), Skipped: f.skipped, TTFT: quartet(f.ttft), E2E: quartet(f.e2e)}
	if f.prompt > 0 {
		st.Uncached = f.missed / f.prompt
	}
	return st, nil
}

// floors is every completed request's floor, in the workload's order.
type floors struct {
	ttft, e2e      []float64
	skipped        int
	prompt, missed float64
}

func floorSamples(open func() (Source, error), p *model.Profile, chunk, maxInput int) (floors, error) {
	if chunk <= 0 && p.Server != nil {
		chunk = p.Server.ChunkedPrefillSize
	}
	if chunk <= 0 {
		chunk = 8192
	}
	if maxInput <= 0 {
		maxInput = p.Model.MaxContext
	}
	blocks := map[uint64]*floorBlock{}
	i := int32(0)
	err := floorPass(open, func(_ int, r *trace.Request) {
		for _, id := range r.HashIDs {
			if b := blocks[id]; b == nil {
				blocks[id] = &floorBlock{first: i, session: r.SessionID}
			} else if b.session != r.SessionID {
				b.shared = true
			}
		}
		i++
	})
	if err != nil {
		return floors{}, err
	}
	var f floors
	last := map[string]floorTurn{}
	i = 0
	err = floorPass(open, func(bs int, r *trace.Request) {
		defer func() { i++ }()
		n := 0
		for n < len(r.HashIDs) {
			if b := blocks[r.HashIDs[n]]; b.first == i && !b.shared {
				break
			}
			n++
		}
		cached := n * bs
		if prev, ok := last[r.SessionID]; ok && continues(r.HashIDs, prev.blocks, prev.input/bs) {
			cached = max(cached, prev.input+prev.output)
		}
		cached = max(min(cached, r.InputLength-1), 0)
		last[r.SessionID] = floorTurn{blocks: append([]uint64(nil), r.HashIDs...), input: r.InputLength, output: r.OutputLength}
		if tooLong(r.InputLength, r.OutputLength, maxInput) != "" {
			f.skipped++
			return
		}
		t := prefillFloor(p.Timing, r.InputLength-cached, cached, chunk)
		f.ttft = append(f.ttft, t)
		for k := 1; k < r.OutputLength; k++ {
			t += p.Timing.DecodeStepS(p.Model, 1, int64(r.InputLength+k))
		}
		f.e2e = append(f.e2e, t)
		f.prompt += float64(r.InputLength)
		f.missed += float64(r.InputLength - cached)
	})
	return f, err
}

// floorPass opens the workload and hands each request to fn with the
// workload's block size; a source that is an io.Closer is closed after.
func floorPass(open func() (Source, error), fn func(blockSize int, r *trace.Request)) error {
	src, err := open()
	if err != nil {
		return err
	}
	if c, ok := src.(io.Closer); ok {
		defer c.Close()
	}
	bs := max(src.Header().BlockSize, 1)
	var r trace.Request
	for {
		if err := src.Next(&r); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		fn(bs, &r)
	}
}

// continues reports whether ids starts with the first whole blocks of prev.
func continues(ids, prev []uint64, whole int) bool {
	whole = min(whole, len(prev))
	if whole == 0 || len(ids) < whole {
		return false
	}
	for i := 0; i < whole; i++ {
		if ids[i] != prev[i] {
			return false
		}
	}
	return true
}

// prefillFloor is n new tokens after p cached ones in chunks, alone.
func prefillFloor(t model.Timing, n, p, chunk int) float64 {
	var s float64
	for n > 0 {
		c := min(n, chunk)
		s += t.PrefillS(c, p)
		n -= c
		p += c
	}
	return s
}

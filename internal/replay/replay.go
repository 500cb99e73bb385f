// Package replay drives a live gateway with a trace over HTTP, as the
// simulator's replay drives simulated workers: sessions closed-loop (a turn
// is sent when its trace time has come and its previous turn has ended,
// plus its think time), an optional concurrency limit and per-request
// timeout, and one metrics.Record per request, so `pdhybrid report` reads a
// live run and a simulated one the same way.
//
// Prompts are synthesised from the trace's hash ids: each block id expands
// deterministically to block_size token ids, so two requests sharing a
// block share its tokens and the workers' prefix caches see what the trace
// says they share.
package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// Config sets a replay up.
type Config struct {
	URL       string // the gateway's base URL
	BlockSize int    // the trace's tokens per hash id
	// TimeScale divides trace time and think time, and multiplies what is
	// measured back into trace seconds: it matches the emulated workers'
	// --time-scale. 0 = 1.
	TimeScale   float64
	Concurrency int     // requests in flight at most; 0 = unlimited
	TimeoutS    float64 // per request; 0 = none
	Client      *http.Client
	// Progress, when set, is told of each request that ended.
	Progress func(done, total int)
}

// Tokens expands a prompt's hash ids into token ids: block b's tokens are a
// deterministic function of its id, the last block cut to the prompt's
// length. Vocabulary 151,936 (Qwen3's).
func Tokens(ids []uint64, input, blockSize int) []int {
	out := make([]int, 0, input)
	for _, id := range ids {
		x := id*0x9E3779B97F4A7C15 + 1
		for k := 0; k < blockSize && len(out) < input; k++ {
			x ^= x >> 33
			x *= 0xff51afd7ed558ccd
			x ^= x >> 29
			out = append(out, int(x%151936))
		}
	}
	return out
}

// Run replays reqs (a whole trace, in file order) and hands each request's
// record to emit as it ends; it returns when every request has ended or ctx
// is done.
func Run(ctx context.Context, cfg Config, reqs []trace.Request, emit func(*metrics.Record)) error {
	if cfg.TimeScale <= 0 {
		cfg.TimeScale = 1
	}
	if cfg.Client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns, t.MaxIdleConnsPerHost = 4096, 1024 // a connection per live session, reused
		cfg.Client = &http.Client{Transport: t}
	}
	bySession := map[string][]trace.Request{}
	var order []string
	for _, r := range reqs {
		if _, ok := bySession[r.SessionID]; !ok {
			order = append(order, r.SessionID)
		}
		bySession[r.SessionID] = append(bySession[r.SessionID], r)
	}
	sort.SliceStable(order, func(i, j int) bool { return bySession[order[i]][0].Timestamp < bySession[order[j]][0].Timestamp })
	var sem chan struct{}
	if cfg.Concurrency > 0 {
		sem = make(chan struct{}, cfg.Concurrency)
	}
	start := time.Now()
	var mu sync.Mutex
	done := 0
	var wg sync.WaitGroup
	for _, sid := range order {
		wg.Add(1)
		go func(turns []trace.Request) {
			defer wg.Done()
			var prevEnd time.Duration
			for _, t := range turns {
				due := time.Duration(t.Timestamp / cfg.TimeScale * float64(time.Second))
				if t.ThinkTimeS != nil && prevEnd > 0 {
					due = max(due, prevEnd+time.Duration(*t.ThinkTimeS/cfg.TimeScale*float64(time.Second)))
				}
				due = max(due, prevEnd)
				if !sleepUntil(ctx, start.Add(due)) {
					return
				}
				if sem != nil {
					select {
					case sem <- struct{}{}:
					case <-ctx.Done():
						return
					}
				}
				rec := send(ctx, cfg, &t, start)
				toTraceTime(rec, cfg.TimeScale)
				if sem != nil {
					<-sem
				}
				prevEnd = time.Since(start)
				mu.Lock()
				emit(rec)
				done++
				if cfg.Progress != nil {
					cfg.Progress(done, len(reqs))
				}
				mu.Unlock()
			}
		}(bySession[sid])
	}
	wg.Wait()
	return ctx.Err()
}

// toTraceTime turns a record's wall-clock seconds into trace seconds: a
// replay at time scale s against workers emulated at the same scale
// measures every interval s times too short.
func toTraceTime(r *metrics.Record, s float64) {
	r.ArrivalS *= s
	r.TTFTS *= s
	r.LatencyS *= s
	r.TPOTS *= s
	r.Breakdown.QueueS *= s
	r.Breakdown.DecodeS *= s
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// send makes one streamed /generate call and measures it.
func send(ctx context.Context, cfg Config, t *trace.Request, start time.Time) *metrics.Record {
	rec := &metrics.Record{RequestID: strconv.FormatInt(t.ChatID, 10), SessionID: t.SessionID, ChatID: t.ChatID, Turn: t.Turn,
		TraceTimeS: t.Timestamp, InputLength: t.InputLength, Status: metrics.StatusFailed}
	if cfg.TimeoutS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(cfg.TimeoutS*float64(time.Second)))
		defer cancel()
	}
	body := map[string]any{"input_ids": Tokens(t.HashIDs, t.InputLength, cfg.BlockSize), "stream": true,
		"session_id": t.SessionID, "sampling_params": map[string]any{"max_new_tokens": max(t.OutputLength, 1)}}
	b, _ := json.Marshal(body)
	// The clock starts when the request is ready to go: building a large
	// prompt's JSON is the client's time, not the server's.
	sent := time.Now()
	rec.ArrivalS = sent.Sub(start).Seconds()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(cfg.URL, "/")+"/generate", bytes.NewReader(b))
	if err != nil {
		rec.Error = "replay-error: " + err.Error()
		return rec
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Session-Id", t.SessionID) // for a front that hashes sessions onto replicas
	resp, err := cfg.Client.Do(req)
	if err != nil {
		rec.Error = cause(ctx, err)
		rec.LatencyS = time.Since(sent).Seconds()
		return finishStatus(ctx, rec)
	}
	defer resp.Body.Close()
	rec.ExecutionMode = resp.Header.Get("X-PDHybrid-Mode")
	rec.DecodeWorker = resp.Header.Get("X-PDHybrid-Worker")
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&e)
		rec.Error = fmt.Sprintf("http-%d: %s", resp.StatusCode, e.Error.Message)
		rec.LatencyS = time.Since(sent).Seconds()
		return rec
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	var first time.Time
	var last struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
		MetaInfo struct {
			CompletionTokens int `json:"completion_tokens"`
			CachedTokens     int `json:"cached_tokens"`
			FinishReason     *struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"finish_reason"`
		} `json:"meta_info"`
	}
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") || line == "data: [DONE]" {
			continue
		}
		last.Error = nil
		json.Unmarshal([]byte(line[len("data: "):]), &last)
		if first.IsZero() && last.Error == nil {
			first = time.Now()
		}
	}
	end := time.Now()
	rec.LatencyS = end.Sub(sent).Seconds()
	if err := sc.Err(); err != nil || (first.IsZero() && last.Error == nil) {
		// An empty stream is an error with its cause (the seed's
		// "generate stream ended before producing any token").
		rec.Error = "stream-ended-before-any-token"
		if err != nil {
			rec.Error = cause(ctx, err)
		}
		return finishStatus(ctx, rec)
	}
	if last.Error != nil {
		// SGLang refuses a streamed request it cannot tokenize (too long,
		// bad sampling params) with a 200, one error event and [DONE].
		rec.Error = "worker-error: " + last.Error.Message
		return rec
	}
	mi := last.MetaInfo
	rec.OutputLength, rec.CachedTokens = mi.CompletionTokens, mi.CachedTokens
	rec.UncachedTokens = t.InputLength - mi.CachedTokens
	if mi.FinishReason == nil {
		rec.Error = "stream-ended-without-finish-reason"
		return rec
	}
	if mi.FinishReason.Type == "abort" {
		rec.Error = "aborted-by-worker: " + mi.FinishReason.Message
		return rec
	}
	rec.Status, rec.FinishReason = metrics.StatusCompleted, mi.FinishReason.Type
	rec.TTFTS = first.Sub(sent).Seconds()
	if rec.OutputLength > 1 {
		rec.TPOTS = (rec.LatencyS - rec.TTFTS) / float64(rec.OutputLength-1)
	}
	rec.Breakdown.DecodeS = rec.LatencyS - rec.TTFTS
	rec.Breakdown.QueueS = rec.TTFTS // a live client sees no finer split
	return rec
}

func cause(ctx context.Context, err error) string {
	if ctx.Err() == context.DeadlineExceeded {
		return "timeout: no completion within the request timeout"
	}
	return "transport-error: " + err.Error()
}

func finishStatus(ctx context.Context, rec *metrics.Record) *metrics.Record {
	if ctx.Err() == context.DeadlineExceeded {
		rec.Status = metrics.StatusTimeout
	}
	return rec
}

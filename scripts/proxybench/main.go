// Command proxybench measures what a reverse proxy adds to a streaming
// worker's time to first token, and the CPU it spends per relayed event:
// the same closed-loop load of concurrent SSE streams sent, in rotation
// within one run, straight to a worker (direct), through the pdhybrid
// gateway and through nginx in front of the same worker. Rotating the
// conditions round by round spreads a shared machine's noise over all
// three instead of one (scripts/proxybench.sh starts the processes;
// docs/gateway.md has the table).
//
// Added TTFT is a condition's percentile less direct's, over the pooled
// requests of all rounds; CPU per event is the proxy's user+system time
// during its rounds (from /proc/PID/stat) over the token events the client
// read in them.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type condition struct {
	name string
	url  string
	pids []int // whose CPU counts (none for direct)
	tr   *http.Transport
}

type result struct {
	ttft []time.Duration
	// wttft is the worker's own time to first token for the same
	// requests (meta_info.pdhybrid.ttft, model time): what the client saw
	// less what happened before the request reached the worker's engine
	// and after its first token left it.
	wttft []time.Duration
	// hop is, per request, the client's TTFT less the worker's: the time
	// spent outside the worker's engine (client, hops, the worker's HTTP
	// server and its wake-up), free of the worker's queueing, which a
	// closed loop of streams makes swing by whole steps.
	hop    []time.Duration
	perReq []reqRecord // every request, for -requests
	round  int         // the round runLoad is measuring
	events int64
	reqs   int64
	errs   int64
	cpu    time.Duration
	wall   time.Duration
}

// reqRecord is one request as -requests writes it.
type reqRecord struct {
	round, stream, k  int
	sent, ttft, wttft time.Duration // sent: since its round started
}

func main() {
	direct := flag.String("direct", "", "the worker's base URL")
	gateway := flag.String("gateway", "", "the gateway's base URL")
	nginx := flag.String("nginx", "", "nginx's base URL")
	gwPids := flag.String("gateway-pids", "", "comma-separated pids of the gateway (CPU)")
	ngPids := flag.String("nginx-pids", "", "comma-separated pids of nginx's workers (CPU)")
	streamsF := flag.String("streams", "100,500", "comma-separated concurrent stream counts")
	rounds := flag.Int("rounds", 3, "rounds per stream count; each round runs every condition once, in rotated order")
	roundDur := flag.Duration("round", 5*time.Second, "how long one condition's load runs in a round")
	tokens := flag.Int("tokens", 32, "max_new_tokens per request (token events per stream)")
	prompt := flag.Int("prompt", 64, "prompt tokens per request")
	out := flag.String("out", "", "write the table's figures as JSON to this file")
	think := flag.Duration("think", 0, "mean think time before each request, exponential, seeded by round and stream so every condition gets the same (0: each stream's requests back to back, which keeps the streams in lockstep cohorts)")
	scale := flag.Float64("time-scale", 1, "the worker's --time-scale: its model-time TTFT over this is wall time (> 0)")
	perReq := flag.String("requests", "", "write every request (streams, condition, round, stream, k, sent, client and worker TTFT in ms) as CSV to this file")
	flag.Parse()
	if *scale <= 0 || *think < 0 {
		fmt.Fprintln(os.Stderr, "proxybench: -time-scale wants > 0 and -think >= 0")
		os.Exit(2)
	}
	if *direct == "" || *gateway == "" || *nginx == "" {
		fmt.Fprintln(os.Stderr, "proxybench: -direct, -gateway and -nginx are required")
		os.Exit(2)
	}
	var counts []int
	for _, s := range strings.Split(*streamsF, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 10000 {
			fmt.Fprintf(os.Stderr, "proxybench: -streams %q: want counts in [1, 10000]\n", s)
			os.Exit(2)
		}
		counts = append(counts, n)
	}
	conds := []*condition{{name: "direct", url: *direct}, {name: "gateway", url: *gateway, pids: pids(*gwPids)}, {name: "nginx", url: *nginx, pids: pids(*ngPids)}}
	type row struct {
		Streams                   int
		Condition                 string
		Requests, Errors, Events  int64
		TTFTp50ms, TTFTp99ms      float64
		WorkerTTFTp50ms           float64 // the worker's own (model-time) TTFT
		WorkerTTFTp99ms           float64
		HopP50ms, HopP99ms        float64 // per request: client's TTFT less the worker's
		AddedHopP50ms             float64 // hop percentile less direct's
		AddedHopP99ms             float64
		AddedP50ms, AddedP99ms    float64
		CPUusPerEvent, EventsPerS float64
		CPUShareOfOneCore         float64
	}
	var rows []row
	for _, n := range counts {
		res := map[string]*result{}
		for _, c := range conds {
			c.tr = &http.Transport{MaxIdleConnsPerHost: 2 * n, MaxConnsPerHost: 0, DisableCompression: true}
			res[c.name] = &result{}
			// Warm-up: connections dialled and every hop's pools filled,
			// not counted.
			runLoad(c, load{n: n, tokens: *tokens, prompt: *prompt, think: *think, scale: *scale, seed: 1 << 32}, time.Second, &result{})
		}
		for r := range *rounds {
			for k := range conds {
				c := conds[(k+r)%len(conds)]
				res[c.name].round = r
				runLoad(c, load{n: n, tokens: *tokens, prompt: *prompt, think: *think, scale: *scale, seed: uint64(r)}, *roundDur, res[c.name])
			}
		}
		if *perReq != "" {
			if err := writeRequests(*perReq, n, conds, res); err != nil {
				fmt.Fprintln(os.Stderr, "proxybench:", err)
				os.Exit(1)
			}
		}
		d := res["direct"]
		dp50, dp99 := pct(d.ttft, 50), pct(d.ttft, 99)
		for _, c := range conds {
			x := res[c.name]
			p50, p99 := pct(x.ttft, 50), pct(x.ttft, 99)
			rw := row{Streams: n, Condition: c.name, Requests: x.reqs, Errors: x.errs, Events: x.events,
				TTFTp50ms: ms(p50), TTFTp99ms: ms(p99), EventsPerS: float64(x.events) / x.wall.Seconds(),
				WorkerTTFTp50ms: ms(pct(x.wttft, 50)), WorkerTTFTp99ms: ms(pct(x.wttft, 99)),
				HopP50ms: ms(pct(x.hop, 50)), HopP99ms: ms(pct(x.hop, 99))}
			if c.name != "direct" {
				rw.AddedP50ms, rw.AddedP99ms = ms(p50-dp50), ms(p99-dp99)
				rw.AddedHopP50ms, rw.AddedHopP99ms = ms(pct(x.hop, 50)-pct(d.hop, 50)), ms(pct(x.hop, 99)-pct(d.hop, 99))
				if x.events > 0 {
					rw.CPUusPerEvent = float64(x.cpu.Microseconds()) / float64(x.events)
				}
				rw.CPUShareOfOneCore = x.cpu.Seconds() / x.wall.Seconds()
			}
			rows = append(rows, rw)
			fmt.Printf("streams=%d %-7s reqs=%d errs=%d events=%d (%.0f/s) ttft p50=%.2fms p99=%.2fms added p50=%+.2fms p99=%+.2fms worker's ttft p50=%.2fms p99=%.2fms hop p50=%.2fms p99=%.2fms (added %+.2f / %+.2f) cpu/event=%.1fµs cpu=%.2f cores\n",
				n, c.name, x.reqs, x.errs, x.events, rw.EventsPerS, rw.TTFTp50ms, rw.TTFTp99ms, rw.AddedP50ms, rw.AddedP99ms, rw.WorkerTTFTp50ms, rw.WorkerTTFTp99ms, rw.HopP50ms, rw.HopP99ms, rw.AddedHopP50ms, rw.AddedHopP99ms, rw.CPUusPerEvent, rw.CPUShareOfOneCore)
		}
	}
	if *out != "" {
		b, _ := json.MarshalIndent(rows, "", "  ")
		if err := os.WriteFile(*out, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "proxybench:", err)
			os.Exit(1)
		}
	}
}

// load is what one condition's run sends.
type load struct {
	n, tokens, prompt int
	think             time.Duration // mean think time before a request
	scale             float64       // the worker's time scale
	seed              uint64        // think times: same seed, same times
}

// runLoad keeps l.n streams open against c for dur, each a closed loop of
// requests, and adds what it measured to res.
func runLoad(c *condition, l load, dur time.Duration, res *result) {
	n := l.n
	client := &http.Client{Transport: c.tr, Timeout: 60 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var mu sync.Mutex
	var events, reqs, errs atomic.Int64
	cpu0 := cpuOf(c.pids)
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local, wlocal, hlocal []time.Duration
			var recs []reqRecord
			rng := rand.New(rand.NewPCG(l.seed, uint64(i)))
			for k := 0; ctx.Err() == nil; k++ {
				if l.think > 0 {
					select {
					case <-time.After(time.Duration(rng.ExpFloat64() * float64(l.think))):
					case <-ctx.Done():
					}
					if ctx.Err() != nil {
						break
					}
				}
				sent := time.Since(t0)
				ttft, wttft, ev, err := stream(client, c.url, promptSeq.Add(1), l.prompt, l.tokens)
				if err != nil {
					errs.Add(1)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				local = append(local, ttft)
				recs = append(recs, reqRecord{round: res.round, stream: i, k: k, sent: sent, ttft: ttft, wttft: wttft})
				if wttft >= 0 {
					wttft = time.Duration(float64(wttft) / l.scale)
					wlocal = append(wlocal, wttft)
					hlocal = append(hlocal, ttft-wttft)
				}
				events.Add(ev)
				reqs.Add(1)
			}
			mu.Lock()
			res.ttft = append(res.ttft, local...)
			res.wttft = append(res.wttft, wlocal...)
			res.hop = append(res.hop, hlocal...)
			res.perReq = append(res.perReq, recs...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.wall += time.Since(t0)
	res.cpu += cpuOf(c.pids) - cpu0
	res.events += events.Load()
	res.reqs += reqs.Load()
	res.errs += errs.Load()
}

// stream sends one streaming /generate and reads it to the end: the time
// to its first token event, the worker's own TTFT from that event's
// meta_info (−1 when it has none) and the token events read. A request runs to
// its end even past the round's end (the next condition starts on a quiet
// worker).
func stream(client *http.Client, base string, q uint64, prompt, tokens int) (time.Duration, time.Duration, int64, error) {
	ids := promptFor(q, prompt)
	body, _ := json.Marshal(map[string]any{"input_ids": ids, "stream": true, "sampling_params": map[string]any{"max_new_tokens": tokens, "ignore_eos": true}})
	req, _ := http.NewRequest(http.MethodPost, base+"/generate", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return 0, 0, 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	br := bufio.NewReaderSize(resp.Body, 16*1024)
	var first time.Duration
	wfirst := time.Duration(-1)
	var ev int64
	done := false
	for {
		line, err := br.ReadSlice('\n')
		if bytes.HasPrefix(line, []byte("data: {")) {
			if first == 0 {
				first = time.Since(t0)
				wfirst = workerTTFT(line)
			}
			ev++
		} else if bytes.HasPrefix(line, []byte("data: [DONE]")) {
			done = true
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			break
		}
	}
	if first == 0 || !done {
		return 0, 0, 0, fmt.Errorf("stream ended without tokens or [DONE]")
	}
	return first, wfirst, ev, nil
}

// promptSeq numbers the run's requests: every request's prompt is its own,
// so no condition finds a prefix another one left in the worker's cache
// (when prompts repeated across conditions, whichever ran a prompt first
// paid its whole prefill, and the first round's first condition took the
// run's TTFT tail).
var promptSeq atomic.Uint64

// promptFor is request q's prompt: its first two tokens spell q in base
// 150,000 (distinct for the first 2.25e10 requests), the rest follow from q.
func promptFor(q uint64, n int) []int {
	ids := make([]int, n)
	for i := range ids {
		switch i {
		case 0:
			ids[i] = int(q % 150000)
		case 1:
			ids[i] = int(q / 150000 % 150000)
		default:
			ids[i] = int((q*7919 + uint64(i)) % 150000)
		}
	}
	return ids
}

// workerTTFT reads meta_info.pdhybrid.ttft (model seconds; the benchmark
// runs the worker at time scale 1) from one SSE data line, or −1.
func workerTTFT(line []byte) time.Duration {
	var ev struct {
		MetaInfo struct {
			Emulator *struct {
				TTFT *float64 `json:"ttft"`
			} `json:"pdhybrid"`
		} `json:"meta_info"`
	}
	if json.Unmarshal(bytes.TrimSpace(bytes.TrimPrefix(line, []byte("data: "))), &ev) != nil ||
		ev.MetaInfo.Emulator == nil || ev.MetaInfo.Emulator.TTFT == nil {
		return -1
	}
	return time.Duration(*ev.MetaInfo.Emulator.TTFT * 1e9)
}

// cpuOf sums user and system time of the processes (Linux /proc).
func cpuOf(ps []int) time.Duration {
	var ticks int64
	for _, p := range ps {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: utime is the
		// 14th field of the line, stime the 15th.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

func pids(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p/100))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// writeRequests appends one stream count's requests to the CSV file path
// (the header first when the file is new).
func writeRequests(path string, n int, conds []*condition, res map[string]*result) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if st, err := f.Stat(); err == nil && st.Size() == 0 {
		fmt.Fprintln(w, "streams,condition,round,stream,k,sent_ms,ttft_ms,worker_ttft_ms")
	}
	for _, c := range conds {
		for _, q := range res[c.name].perReq {
			fmt.Fprintf(w, "%d,%s,%d,%d,%d,%.3f,%.3f,%.3f\n", n, c.name, q.round, q.stream, q.k, ms(q.sent), ms(q.ttft), ms(q.wttft))
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

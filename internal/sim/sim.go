package sim

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// Source is a stream of trace requests in non-decreasing timestamp order:
// a *trace.Reader or a synthetic generator.
type Source interface {
	Header() trace.Header
	Next(*trace.Request) error
}

// Sink receives what a run records. Any method may be a no-op.
type Sink interface {
	Request(*metrics.Record) error
	Worker(*metrics.WorkerSample) error
	Event(*metrics.Event) error
}

// Progress is called now and then with the requests finished so far and the
// simulated time. It must not block for long.
type Progress func(finished int, simTimeS float64)

// Result is what a run returns besides what it wrote to the sink.
type Result struct {
	Summary metrics.Summary        `json:"summary"`
	Workers map[string]WorkerStats `json:"workers"`
	Replay  ReplayStats            `json:"replay"`
}

// WorkerStats are one worker's counters at the end of a run.
type WorkerStats struct {
	Role          string  `json:"role"`
	PoolTokens    int64   `json:"pool_tokens"`
	PrefillSteps  int64   `json:"prefill_steps"`
	DecodeSteps   int64   `json:"decode_steps"`
	PrefillTokens int64   `json:"prefill_tokens"`
	CachedTokens  int64   `json:"cached_tokens"`
	KVWaits       int64   `json:"kv_waits"`
	EvictedTokens int64   `json:"evicted_tokens"`
	BusyS         float64 `json:"busy_s"`
	Utilization   float64 `json:"utilization"` // busy share of the run's duration
	// Host is the worker's host KV tier (hicache.go; absent without one).
	Host *HostStats `json:"host,omitempty"`
}

// ReplayStats describe the replay itself.
type ReplayStats struct {
	Requests       int     `json:"requests"`
	Sessions       int     `json:"sessions"`
	OrphanTurns    int     `json:"orphan_turns"` // parent never seen: released at trace time
	GateWaits      int     `json:"gate_waits"`   // requests held by the concurrency limit
	MaxInflight    int     `json:"max_inflight"`
	MaxBacklog     int     `json:"max_backlog"` // most requests in flight or waiting at once
	SimDurationS   float64 `json:"-"`           // the clock at the end; summary.json has one duration, the summary's
	Events         int64   `json:"events"`
	TraceBlockSize int     `json:"trace_block_size"`
	// KVTransferTokens is the prompt KV, in tokens, that crossed P→D links
	// (× the model's KV bytes per token for bytes).
	KVTransferTokens int64 `json:"kv_transfer_tokens"`
	// ForgottenSessions is how many idle sessions --session-idle-forget
	// dropped (forget.go); absent when none.
	ForgottenSessions int `json:"forgotten_sessions,omitempty"`
	// closedSessions is how many sessions were closed after their last
	// turn (sessionend.go); not written: closing changes no result.
	closedSessions int
}

// Sim is one run in progress.
type Sim struct {
	cfg      Config
	src      Source
	sink     Sink
	quiet    bool // no sink was given: events are not formatted at all
	progress Progress

	now    float64
	seq    uint64
	events eventHeap
	nEv    int64

	workers  []*engine.Worker
	wsched   []schedule
	links    []*engine.Link
	lsched   []schedule
	prefills []int // indices into workers
	decodes  []int
	colos    []int
	disp     *kvc.Dispatcher
	dcaps    []kvc.DecoderCaps // kvcache-centric: what each decoder offers (decoderkind.go)
	deadPeer map[[2]int]bool   // hair-trigger peer failures: (P, D) pairs (transport.go)

	snaps        []*engine.SnapshotStore // D→P snapshot buffer per prefill worker, made on first use (dtop.go)
	lastSync     map[string]int64        // active mode: session tokens at its last push
	syncOutcomes map[string]int          // "<event>: <stage>" → count
	kvBytes      int64
	kvSentTokens int64 // prompt tokens whose KV crossed a P→D link

	pending []engine.Event // worker events not yet handled

	idle     []idleRef // sessions with no request in flight, oldest first (chain.go)
	idleHead int
	idleIDs  int // block ids held by idle sessions' chains

	checked    *checkedSource
	closeEnded bool        // close sessions after their last turn (sessionend.go)
	forget     []forgetRef // sessions gone idle, oldest first (forget.go)
	forgetHead int

	replay
	nextWarn int      // backlog at which to warn next (overload.go)
	warnings []string // what warn said, for the summary
	recycler
	collector *metrics.Collector
	gaps      *metrics.GapHistogram // every worker's inter-token gaps
	finished  int
	rec       metrics.Record
	sample    metrics.WorkerSample
	ev        metrics.Event
	err       error
}

type schedule struct {
	at  float64
	ver uint32
	on  bool
}

// StopError says a run stopped before it replayed its whole trace. Run
// returns it together with the partial Result, whose summary has Complete
// false and StopReason = Reason; what the sink received so far is valid.
// Err is the underlying cause when there is one: the context's error
// (context.Canceled, context.DeadlineExceeded) when the context ended, so
// errors.Is(err, context.Canceled) tells an interrupted run; nil for a stop
// the simulator decided itself (a limit).
type StopError struct {
	Reason string
	Err    error
}

func (e *StopError) Error() string { return "sim: run stopped: " + e.Reason }
func (e *StopError) Unwrap() error { return e.Err }

// Run replays src under cfg and writes to sink (nil for none). When the run
// stops early (ctx ends, or a *StopError), Run returns the partial result
// with the *StopError; on any other error the result is nil.
func Run(ctx context.Context, cfg Config, src Source, sink Sink, progress Progress) (*Result, error) {
	s, err := newSim(cfg, src, sink, progress)
	if err != nil {
		return nil, err
	}
	if err := s.loop(ctx); err != nil {
		var stop *StopError
		if !errors.As(err, &stop) {
			return nil, err
		}
		// ITL is over completed requests: what the ones still running
		// folded goes back (engine/itl.go).
		for _, w := range s.workers {
			w.RetractLiveGaps()
		}
		res := s.result()
		res.Summary.Complete = false
		res.Summary.StopReason = stop.Reason
		return res, err
	}
	return s.result(), nil
}

// ctxStop is the StopError for an ended context: the reason is the
// context's cause (context.WithCancelCause) when one was given.
func ctxStop(ctx context.Context) *StopError {
	err := ctx.Err()
	reason := err.Error()
	if c := context.Cause(ctx); c != nil && c != err {
		reason = c.Error()
	}
	return &StopError{Reason: reason, Err: err}
}

// newSim builds the cluster and reads the first trace request.
func newSim(cfg Config, src Source, sink Sink, progress Progress) (*Sim, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Sim{cfg: cfg, checked: newCheckedSource(src), sink: sink, progress: progress}
	s.src = s.checked
	// Sessions are closed after their last turn where the source knows it,
	// unless idle sessions are forgotten: that bound then decides, as it
	// did before (sessionend.go).
	s.closeEnded = s.checked.ends != nil && cfg.SessionIdleForgetS <= 0
	if cfg.SessionIdleForgetS > 0 || s.closeEnded {
		s.checked.chk.TrackForgets()
	}
	if s.sink == nil {
		s.sink, s.quiet = nopSink{}, true
	}
	s.gaps = metrics.NewGapHistogram()
	s.lastSync, s.syncOutcomes = map[string]int64{}, map[string]int{}
	if err := s.build(); err != nil {
		return nil, err
	}
	s.collector = metrics.NewCollector(cfg.SLO)
	if c, ok := src.(countedSource); ok {
		s.collector.Reserve(c.Requests())
	}
	s.collector.SetITL(s.gaps)
	s.initReplay()
	return s, nil
}

type nopSink struct{}

func (nopSink) Request(*metrics.Record) error      { return nil }
func (nopSink) Worker(*metrics.WorkerSample) error { return nil }
func (nopSink) Event(*metrics.Event) error         { return nil }

func (s *Sim) build() error {
	c := &s.cfg
	bs := s.src.Header().BlockSize
	if bs <= 0 {
		return fmt.Errorf("sim: trace has no block size")
	}
	s.kvBytes = c.Profile.Model.KVBytesPerToken()
	backup := c.Mechanism == KVCacheCentric && c.KVC.PrefillBackup == "capacity-backup"
	peerD := c.Mechanism.isPeer()
	hc, err := c.HiCache.engineConfig()
	if err != nil {
		return err
	}
	if c.Mechanism == KVCacheCentric {
		if s.dcaps, err = c.KVC.decoderKinds(c.Decode); err != nil {
			return err
		}
	}
	add := func(name string, role engine.Role, frac float64, cache bool, sc engine.SessionConfig) (int, error) {
		dr := peerD && role == engine.RoleDecode
		local := dr && c.Mechanism != PDDecodeRadix
		if role == engine.RoleDecode && c.Mechanism == KVCacheCentric {
			var kdr, kca bool
			sc, kdr, kca = s.decoderEngine(len(s.decodes), sc)
			dr, local = kdr, kca
		}
		w, err := engine.New(engine.Config{
			HiCache: hc,
			Name:    name, Role: role, Profile: c.Profile, BlockSize: bs,
			PoolTokens: c.Profile.KVPoolTokens(frac), ChunkTokens: c.ChunkTokens,
			MaxRunning: c.MaxRunning, PrefixCache: cache, MixedChunk: c.MixedChunk, Gaps: s.gaps, Session: sc,
			PrefillBackup:     backup && role == engine.RolePrefill,
			PriorityEviction:  c.Mechanism == KVCacheCentric && c.KVC.PrefillPriorityEviction && role == engine.RolePrefill,
			SessionOutputOnly: c.OutputReuse == OutputReuseSessions,
			DecodeRadix:       dr, LocalPrefill: local,
			ShortestFirst: c.Mechanism == KVCacheCentric && c.KVC.V3.PrefillOrder == "shortest",
			MaxWaitS:      c.KVC.V3.PrefillMaxWaitS,
			SliceTPOTS:    c.workerSliceTPOTS(),

			PrefillBypassTokens: c.pPrefillBypass(role),
			PrefillBypassAhead:  c.pPrefillBypassAhead(role),
		})
		if err != nil {
			return 0, err
		}
		if w.Capacity() <= 0 {
			return 0, fmt.Errorf("sim: worker %s has no KV pool at memory fraction %v", name, frac)
		}
		s.workers = append(s.workers, w)
		return len(s.workers) - 1, nil
	}
	opts := kvc.Options{Alpha: c.Alpha, FloorK: c.FloorK}
	var pNames, dNames []string
	var pOpts, dOpts kvc.Options
	switch c.Mechanism {
	case PDDisaggregation, KVCacheCentric, PDConditional, PDPrefixDecider, PDDecodeRadix, PDPPD, PDDeflect:
		for i := 0; i < c.Prefill; i++ {
			idx, err := add(fmt.Sprintf("prefill-%d", i), engine.RolePrefill, c.PrefillMemFraction, true, engine.SessionConfig{})
			if err != nil {
				return err
			}
			s.prefills = append(s.prefills, idx)
			s.links = append(s.links, engine.NewLink(c.Profile.Links[c.Link]))
			pNames = append(pNames, s.workers[idx].Name())
		}
		pOpts = opts
		pOpts.IndexBlocks = int(s.workers[s.prefills[0]].Capacity()) / bs
		slidingView(&pOpts, s.workers[s.prefills[0]], bs, false, false)
		// SGLang's PD decode keeps no prefix cache: it receives the whole
		// prompt's KV every time. KVC's decoders keep sessions.
		var sc engine.SessionConfig
		if c.Mechanism == KVCacheCentric {
			sc = c.KVC.sessionConfig()
		}
		for i := 0; i < c.Decode; i++ {
			idx, err := add(fmt.Sprintf("decode-%d", i), engine.RoleDecode, c.DecodeMemFraction, false, sc)
			if err != nil {
				return err
			}
			s.decodes = append(s.decodes, idx)
			dNames = append(dNames, s.workers[idx].Name())
		}
		dOpts = opts
		dOpts.IndexBlocks = int(s.workers[s.decodes[0]].Capacity()) / bs
		slidingView(&dOpts, s.workers[s.decodes[0]], bs, true, c.Mechanism == KVCacheCentric)
		dOpts.NoCache = c.Mechanism == PDDisaggregation // they keep nothing between requests
	case PDColo:
		for i := 0; i < c.Colo; i++ {
			idx, err := add(fmt.Sprintf("colo-%d", i), engine.RoleColocated, c.ColoMemFraction, true, engine.SessionConfig{})
			if err != nil {
				return err
			}
			s.colos = append(s.colos, idx)
			dNames = append(dNames, s.workers[idx].Name())
		}
		dOpts = opts
		dOpts.IndexBlocks = int(s.workers[s.colos[0]].Capacity()) / bs
		slidingView(&dOpts, s.workers[s.colos[0]], bs, true, false)
	}
	dc := c.dispatchConfig()
	dc.BlockSize = bs
	if c.Mechanism == KVCacheCentric {
		dc.Workers = s.workerCaps()
	}
	if c.editDispatch != nil {
		c.editDispatch(&dc) // the conformance suite's rows (conformance_test.go)
	}
	if c.Mechanism == PDConditional && !c.Peer.ApproxOverlap {
		dc.Peer.DecodeCached = s.kvEvents
	}
	if len(s.decodes) > 0 {
		dc.DecodeKVBlocks = int(s.workers[s.decodes[0]].Capacity()) / bs
	}
	s.disp = kvc.NewDispatcher(dc, pNames, dNames, pOpts, dOpts)
	if s.quiet {
		s.disp.SetQuiet() // the paths go only to the sink
	}
	if c.recycle == recyclePoison {
		s.disp.PoisonRecycled()
	}
	s.wsched = make([]schedule, len(s.workers))
	s.lsched = make([]schedule, len(s.links))
	return nil
}

func (s *Sim) push(e event) {
	s.seq++
	e.seq = s.seq
	s.events.push(e)
}

// pushFor queues e for request r, marked with r's life (req.gen): an
// event that outlives the request (its timeout, an admission reply or a
// backpressure pause after a timeout, a landed transfer's timeout) finds
// the record recycled for a later request and is skipped (event.current).
func (s *Sim) pushFor(r *req, e event) {
	e.req, e.ver = r, r.gen
	s.push(e)
}

// resched puts worker i's next step on the queue if it moved.
func (s *Sim) resched(i int) {
	t, ok := s.workers[i].NextTime()
	s.keepScheduled(&s.wsched[i], evWorker, i, t, ok)
}

func (s *Sim) reschedLink(i int) {
	t, ok := s.links[i].NextTime()
	s.keepScheduled(&s.lsched[i], evLink, i, t, ok)
}

// keepScheduled keeps one live queue entry per worker or link: a changed time
// bumps the version so the old entry is skipped when it surfaces.
func (s *Sim) keepScheduled(sc *schedule, kind uint8, i int, t float64, ok bool) {
	if ok == sc.on && (!ok || t == sc.at) {
		return
	}
	sc.ver++
	sc.at, sc.on = t, ok
	if ok {
		s.push(event{t: t, kind: kind, idx: int32(i), ver: sc.ver})
	}
}

// loop interleaves trace ingestion with the event queue in time order.
func (s *Sim) loop(ctx context.Context) error {
	for {
		if s.err != nil {
			return s.err
		}
		if s.nEv&0xfff == 0 && ctx.Err() != nil {
			return ctxStop(ctx)
		}
		next := math.Inf(1)
		if len(s.events) > 0 {
			next = s.events[0].t
		}
		if s.hasNext && s.nextAt <= next {
			if err := s.ingest(); err != nil {
				return err
			}
			if err := s.watchBacklog(); err != nil {
				return err
			}
			s.drain()
			continue
		}
		if len(s.events) == 0 {
			if s.live > 0 { // a quiet run has no sampling to notice (sampleWorkers)
				s.stuck()
				return s.err
			}
			return nil
		}
		e := s.events.pop()
		s.nEv++
		if e.t > s.now {
			s.now = e.t
		}
		switch e.kind {
		case evWorker:
			sc := &s.wsched[e.idx]
			if !sc.on || sc.ver != e.ver {
				continue
			}
			sc.on = false
			s.workers[e.idx].Advance(s.now)
			s.collect(int(e.idx))
		case evLink:
			sc := &s.lsched[e.idx]
			if !sc.on || sc.ver != e.ver {
				continue
			}
			sc.on = false
			for _, t := range s.links[e.idx].Advance(s.now) {
				switch tag := t.Tag.(type) {
				case *kvXfer:
					s.landTransfer(tag)
				case *syncOp:
					s.syncDumped(tag)
				}
			}
			s.reschedLink(int(e.idx))
		case evRelease:
			s.release(e.req)
		case evTimeout:
			if e.current() {
				s.timeout(e.req)
			}
		case evSample:
			s.sampleWorkers()
		case evAdmit:
			if e.current() {
				s.admit(e.req)
			}
		case evExecute:
			if e.current() && !e.req.ended {
				s.execute(e.req)
			}
		case evXferTimeout:
			if e.current() {
				s.transferTimeout(e.req, e.xfer)
			}
		case evLand:
			s.landTransfer(e.xfer.Tag.(*kvXfer))
		case evSync:
			s.syncEvent(e)
		}
		s.drain()
	}
}

// collect takes worker i's events onto the pending list and reschedules it.
func (s *Sim) collect(i int) {
	for _, ev := range s.workers[i].TakeEvents() {
		if ev.Kind == engine.EvStall && s.quiet {
			continue
		}
		if ev.Kind == engine.EvStall {
			// The seed's trim blocked mooncake's completion handling for 30+ s
			// (F6): say so when a stall outlasts the transfer timeout.
			detail := fmt.Sprintf("trim stalled the scheduler %.3f s", ev.Stall)
			if t := s.cfg.TransferTimeoutS; t > 0 && ev.Stall > t {
				detail += fmt.Sprintf(", longer than the %g s transfer timeout", t)
			}
			s.logEventW("stall", s.workers[i].Name(), detail)
			continue
		}
		if ev.Kind == engine.EvSessionEvicted {
			// A decoder's eviction report: the router's belief follows it
			// (or not, with --residency-belief never-shrink).
			if ev.Demoted {
				s.disp.SessionDemotedKey(i-s.decodes[0], engine.SessionKey{ID: ev.Session, Num: ev.SessionNum}) // on its host tier
			} else if ev.Stored {
				s.disp.SessionStoredKey(i-s.decodes[0], engine.SessionKey{ID: ev.Session, Num: ev.SessionNum}) // in its storage pool
			} else {
				s.disp.SessionEvictedKey(i-s.decodes[0], engine.SessionKey{ID: ev.Session, Num: ev.SessionNum})
			}
			if s.cfg.KVC.DToP == DToPOnEvict && len(ev.Blocks) > 0 {
				// The dump carries the session's whole path, shared prefix included.
				tokens := int64(len(ev.Blocks)) * int64(s.src.Header().BlockSize)
				s.startSync(&syncOp{session: ev.Session, p: s.syncPrefill(engine.SessionKey{ID: ev.Session, Num: ev.SessionNum}), d: i - s.decodes[0], blocks: ev.Blocks, tokens: tokens, held: true})
			}
			s.ev = metrics.Event{TimeS: s.now, Kind: "eviction", Worker: s.workers[i].Name(), SessionID: ev.Session,
				Detail: s.cfg.KVC.Eviction, Tokens: int64(ev.Tokens), State: evictedState(ev.Hot)}
			if err := s.sink.Event(&s.ev); err != nil && s.err == nil {
				s.err = err
			}
			continue
		}
		s.pending = append(s.pending, ev)
	}
	s.resched(i)
}

// evictedState is an eviction's session state in evictions.jsonl.
func evictedState(hot bool) string {
	if hot {
		return "hot"
	}
	return "idle"
}

// drain handles pending worker events until none are left; handlers may
// call workers, which add more (drain is called from the loop only, never
// from a handler). It walks the list by index and then empties it in place,
// so the list keeps its array from one drain to the next.
func (s *Sim) drain() {
	for i := 0; i < len(s.pending); i++ {
		s.handle(s.pending[i])
	}
	clear(s.pending)
	s.pending = s.pending[:0]
	s.recycleRetired()
	if afterDrain != nil {
		afterDrain(s)
	}
}

// afterDrain, when set (tests), sees the run after every drain: every
// outcome of the instant handled, the workers and the control plane at
// rest.
var afterDrain func(*Sim)

func (s *Sim) result() *Result {
	res := &Result{Workers: map[string]WorkerStats{}, Replay: s.replay.stats}
	res.Replay.SimDurationS = s.now
	res.Replay.Events = s.nEv
	res.Replay.KVTransferTokens = s.kvSentTokens
	res.Summary = s.collector.Summary(0)
	res.Summary.Warnings = s.warnings
	if len(s.syncOutcomes) > 0 {
		res.Summary.DToPSync = s.syncOutcomes
	}
	res.Summary.Mechanism = string(s.cfg.Mechanism)
	res.Summary.Policy = string(s.cfg.Policy)
	dur := res.Summary.DurationS
	for _, w := range s.workers {
		st := w.Stats()
		ws := WorkerStats{
			Role: w.Role().String(), PoolTokens: w.Capacity(),
			PrefillSteps: st.PrefillSteps, DecodeSteps: st.DecodeSteps,
			PrefillTokens: st.PrefillTokens, CachedTokens: st.CachedTokens,
			KVWaits: st.KVWaits, EvictedTokens: st.EvictedTokens, BusyS: st.BusyS,
			Host: hostStats(w),
		}
		if dur > 0 {
			ws.Utilization = st.BusyS / dur
		}
		res.Workers[w.Name()] = ws
	}
	return res
}

// slidingView gives a router's index the sliding-window pool of workers
// like w (SGLang's, for models it serves from two pools, or vLLM's rule
// for sliding layers' freed blocks), in blocks of bs tokens: the index
// then cuts an overlap as the workers' match would.
// tails says the workers keep each turn's output below its prompt (the
// colocated workers and KVC's decoders; a prefill worker keeps prompts).
// pins says they pin sessions (KVC's decoders, session.go): on a vLLM
// worker a pinned session's path keeps its sliding blocks, which a
// router's record cannot tell from the rest, so it gets no vLLM view
// (measured worse with one: docs/fidelity.md).
func slidingView(o *kvc.Options, w *engine.Worker, bs int, tails, pins bool) {
	if win, sl, layers := w.FreedWindow(); win > 0 && !pins {
		// vLLM's: a hit needs cdiv(window − 1, block) blocks.
		o.SlidingRunBlocks = (win - 1 + bs - 1) / bs
		o.SlidingLayers, o.Layers = sl, layers
		o.SlidingTails = tails
	}
	if win := w.SWAWindow(); win > 0 {
		o.SlidingRunBlocks = (win + bs - 1) / bs
		o.SlidingPoolBlocks = int(w.SWACapacity()) / bs
		o.SlidingTails = tails
	}
}

package sim

import (
	"fmt"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// Recycling a finished request's record (req, with its engine.Requests)
// and its dispatch (kvc.Dispatch): together about half of what a run
// allocates, so half of the collector's work, when each was new.
//
// The lifetime rule. A request's record is referred to, while it lives,
// by the replay's in-flight table (by chat id), its parent's list of
// waiting next turns, the concurrency gate, the event queue, its workers
// (through its engine.Requests' Tag), the links (a chunk transfer's
// kvXfer), a passive D→P snapshot's callback (dtop.go) and the worker
// events waiting in s.pending. At its end (end) the table, the parent's
// list and the gate have let go already. What may still refer to it:
//
//   - events in the queue: its timeout, an admission reply or a pause's
//     end (a timeout ended it meanwhile), a transfer's timeout. They do
//     nothing for an ended request, and each carries the record's life
//     (req.gen, event.ver; pushFor), so that after the record is reused one
//     of them is skipped (event.current) as it was ignored before;
//   - worker events of the same drain: the record is handed back only when
//     the drain is over (retired, recycleRetired);
//   - its workers: a completed request's are done with it (engine/lifetime.go:
//     it finished on its decoder, and its prefill worker released it before
//     the decode started); the workers' stale watch entries are kept stale
//     by engine.Request.Renew, which fills the engine.Requests of a
//     reused record;
//   - a transfer still on a link, or landing after a trim stall
//     (xferLive > 0), a snapshot's callback (syncWait), an aborted prefill
//     in its worker's step in progress: only a request that failed or timed
//     out can end with any of these, and such a request is not recycled
//     (the collector takes it, as it took every record before);
//   - the session (lastChat is an id), the router (counts, paths of block
//     ids, never the dispatch), the metrics (the record is copied into one
//     Record the sink writes at once), the output tail (ids and counts):
//     none refers to the record or the dispatch.
//
// So the last reference to a completed request's record and dispatch ends
// with the drain that handled its EvFinished: both go on a free list of
// the run (single-threaded and deterministic: no sync.Pool) and the next
// request ingested takes them. The poison mode (tests) checks the rule
// instead of trusting it: a record that would be recycled is checked
// against every worker (engine.Worker.Holds), then poisoned and never
// reused: its life set to poisonGen, which every path that takes a record
// from a holder checks (req.alive), its pointers cleared, and its dispatch
// poisoned by the dispatcher (kvc.Dispatcher.PoisonRecycled), so that any
// use after its end panics instead of reading another request's state.

// recycleMode is what becomes of a finished request's record.
type recycleMode uint8

const (
	recycleOn     recycleMode = iota // reused for a later request
	recyclePoison                    // checked, poisoned and never reused (tests)
	recycleOff                       // left to the collector (tests: the results must not differ)
)

// poisonGen is the life of a poisoned record: never a live one (a record
// would have to be reused 2³² − 1 times).
const poisonGen = ^uint32(0)

// spareSlack is how many more spare records than live requests the free
// list keeps: enough for the live count's swings in a run that keeps up
// (a few hundred requests), while a backlog that drains lets its records
// go, so that what a run holds follows what is live (TestHeap*).
const spareSlack = 1024

// recycler is the run's free list of records and the records ended in the
// drain in progress.
type recycler struct {
	spare   []*req
	retired []*req
	made    int // records allocated (tests)
}

// newReq is a record for the request being ingested: a recycled one,
// emptied, or a new one. A recycled record keeps its prefill-side
// engine.Request (filled again by Renew), its list of waiting turns'
// array, and the engine's generation of its decode-side Request.
func (s *Sim) newReq() *req {
	n := len(s.spare)
	if n == 0 {
		s.made++
		return &req{p: -1, d: -1}
	}
	r := s.spare[n-1]
	s.spare[n-1] = nil
	s.spare = s.spare[:n-1]
	r.reset()
	return r
}

// reset empties a recycled record as a new one is (p and d −1), but for
// what newReq says it keeps, and moves its life on. Field by field: one
// assignment of the whole record had to take the decoder side's
// engine.Request out and back around it, about 2 KB moved a request (47M
// instructions of a 100K DP×8 run). TestResetEmptiesEveryField fails when
// a field is added to req and not reset here.
func (r *req) reset() {
	r.t = reqTrace{}
	r.sess = nil
	r.released, r.sent = 0, 0
	r.waiters = r.waiters[:0] // emptied (cleared) at the request's end
	r.p, r.d = -1, -1
	r.de.Renew(engine.Request{})
	r.x = nil
	r.startAt, r.sentKV, r.xferLive, r.xferEnd, r.firstAt = 0, 0, 0, 0, 0
	r.gen++
	r.ended, r.dead, r.reading, r.shared = false, false, false, false
	r.delayed, r.pDone, r.dReady, r.syncWait = false, false, false, false
}

// alive returns r, or panics when r is a poisoned record: something kept
// a reference past the request's end and used it.
func (r *req) alive() *req {
	if r.gen == poisonGen {
		panic("sim: a recycled request's record was used after its end (recycle.go)")
	}
	return r
}

// recycleRetired hands the records of the requests that ended in the
// drain just over to the free list (the poison mode: checks and poisons
// them).
func (s *Sim) recycleRetired() {
	if len(s.retired) == 0 {
		return
	}
	for i, r := range s.retired {
		s.retired[i] = nil
		if r.dead || r.xferLive > 0 || r.syncWait || s.cfg.recycle == recycleOff {
			continue // failed or timed out: something may still hold it (see above)
		}
		if s.cfg.recycle == recyclePoison {
			s.poison(r)
			continue
		}
		if r.x != nil {
			s.disp.Recycle(r.x)
		}
		s.spare = append(s.spare, r)
	}
	s.retired = s.retired[:0]
	for len(s.spare) > s.live+spareSlack { // the backlog shrank: memory follows the live requests
		s.spare[len(s.spare)-1] = nil
		s.spare = s.spare[:len(s.spare)-1]
	}
}

// poison checks that no worker holds r's engine.Requests, and poisons r
// and its dispatch.
func (s *Sim) poison(r *req) {
	for _, w := range s.workers {
		for _, e := range []*engine.Request{&r.de, r.pe} {
			if where := w.Holds(e); where != "" {
				panic(fmt.Sprintf("sim: request %d ended, and worker %s still holds it (%s)", r.t.ChatID, w.Name(), where))
			}
		}
	}
	if r.x != nil {
		s.disp.Recycle(r.x) // the dispatcher poisons it
	}
	r.de.Renew(engine.Request{Tag: r, Stage: poisonStage, ID: -1})
	if r.pe != nil {
		r.pe.Renew(engine.Request{Tag: r, Stage: poisonStage, ID: -1})
	}
	*r = req{gen: poisonGen, de: r.de, pe: r.pe, p: -1 << 40, d: -1 << 40}
}

// poisonStage is no stage a worker knows.
const poisonStage = engine.Stage(0xee)

package emulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/engine"
)

// A shared storage pool for emulated workers (SGLang HiCache's L3 as one
// Mooncake or 3FS store for the cluster). In the simulator the workers of
// a run share one engine.StoragePool in one process; emulated workers are
// processes of their own, so the pool's index lives in one small loopback
// service (StoreServer, which `pdhybrid up --hicache-storage-shared`
// starts) and each worker reaches it through a StoreClient, its
// engine.StorageIndex. The service keeps only the index (which prefix
// blocks the pool holds, its LRU and capacity), not KV bytes: the engine
// charges a prefetch's time over each worker's own storage link as it
// does in the simulator. The workers' clocks are their own, so the
// service orders its LRU by the order calls reach it, not by their times.
// The pool's aggregate bandwidth (StoreServer.BandwidthBytes, up
// --hicache-storage-shared-bandwidth) is booked here, first booked first
// served as the simulator's shared pool books it: each booking carries the
// worker's model time and the wall instant of its model time 0, so the
// service puts every worker's prefetches on one timeline without reading
// a clock itself.

// storeReq and storeRep are the service's JSON bodies.
type storeReq struct {
	BlockSize int      `json:"block_size,omitempty"`
	Capacity  int64    `json:"capacity,omitempty"`
	Blocks    []uint64 `json:"blocks,omitempty"`
	Last      int64    `json:"last,omitempty"`
	// A booking (/storage/book): a prefetch of Bytes that began at Start,
	// in the seconds of a worker whose model time 0 was the wall instant
	// EpochNS (Unix nanoseconds) and whose model runs Scale seconds a
	// wall second.
	Start   float64 `json:"start,omitempty"`
	Bytes   int64   `json:"bytes,omitempty"`
	EpochNS int64   `json:"epoch_ns,omitempty"`
	Scale   float64 `json:"scale,omitempty"`
}

type storeRep struct {
	Capacity int64  `json:"capacity,omitempty"`
	Blocks   int    `json:"blocks,omitempty"`
	Tokens   int64  `json:"tokens,omitempty"`
	Added    int64  `json:"added,omitempty"`
	Evicted  int64  `json:"evicted,omitempty"`
	OK       bool   `json:"ok,omitempty"`
	Error    string `json:"error,omitempty"`
	// Free (/storage/book): when the aggregate link has carried the
	// prefetch, in the booking worker's seconds; Booked false when the
	// pool's bandwidth is unlimited.
	Free   float64 `json:"free,omitempty"`
	Booked bool    `json:"booked,omitempty"`
}

// StoreServer is the shared pool's index as a loopback HTTP service:
// POST /storage/{open,match,write,touch,tokens,book,queue}. The first worker to open
// it sizes it.
type StoreServer struct {
	// BandwidthBytes is the pool's aggregate bandwidth in bytes per model
	// second, which every worker's prefetches share (/storage/book); 0,
	// the default, is unlimited. Set it before serving.
	BandwidthBytes float64
	mu             sync.Mutex
	idx            engine.StorageIndex
	bs             int
	seq            float64 // the LRU's clock: one tick per call
	// The aggregate link's bookings, in wall seconds since baseNS (the
	// first booking worker's model time 0): freeAt is when it has carried
	// every prefetch booked so far.
	baseNS int64
	based  bool
	freeAt float64
}

// NewStoreServer is an empty pool's service of unlimited aggregate
// bandwidth.
func NewStoreServer() *StoreServer { return &StoreServer{} }

func (s *StoreServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var q storeReq
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(&q); err != nil {
		http.Error(w, fmt.Sprintf("storage: bad body: %v", err), http.StatusBadRequest)
		return
	}
	rep, code := s.do(r.URL.Path, q)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(rep)
}

func (s *StoreServer) do(path string, q storeReq) (storeRep, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if path == "/storage/open" {
		if q.BlockSize <= 0 || q.Capacity <= 0 {
			return storeRep{Error: fmt.Sprintf("open: block_size %d and capacity %d, expected both > 0", q.BlockSize, q.Capacity)}, http.StatusBadRequest
		}
		if s.idx == nil {
			s.idx, s.bs = engine.NewStorageIndex(q.BlockSize, q.Capacity), q.BlockSize
		}
		c, err := s.idx.Open(q.BlockSize, q.Capacity)
		if err != nil {
			return storeRep{Error: err.Error()}, http.StatusConflict
		}
		return storeRep{Capacity: c, OK: true}, http.StatusOK
	}
	if s.idx == nil {
		return storeRep{Error: "storage pool not opened"}, http.StatusConflict
	}
	if path == "/storage/book" {
		return s.book(q)
	}
	if path == "/storage/queue" {
		return s.queue(q)
	}
	if path != "/storage/tokens" {
		if len(q.Blocks) == 0 {
			return storeRep{Error: "no blocks"}, http.StatusBadRequest
		}
		if q.Last < 1 || q.Last > int64(s.bs) {
			return storeRep{Error: fmt.Sprintf("last %d: the last block's tokens, expected 1 to the block size %d", q.Last, s.bs)}, http.StatusBadRequest
		}
	}
	s.seq++
	switch path {
	case "/storage/match":
		n, t := s.idx.Match(q.Blocks, q.Last)
		return storeRep{Blocks: n, Tokens: t, OK: true}, http.StatusOK
	case "/storage/write":
		added, evicted, ok := s.idx.Write(s.seq, q.Blocks, q.Last)
		return storeRep{Added: added, Evicted: evicted, OK: ok}, http.StatusOK
	case "/storage/touch":
		s.idx.Touch(s.seq, q.Blocks, q.Last)
		return storeRep{OK: true}, http.StatusOK
	case "/storage/tokens":
		return storeRep{Tokens: s.idx.Tokens(), OK: true}, http.StatusOK
	}
	return storeRep{Error: "no such route " + path}, http.StatusNotFound
}

// book puts a prefetch on the aggregate link (held lock): it starts when
// the link has carried every prefetch booked before it, or when it began,
// whichever is later, and takes bytes ÷ bandwidth, as the simulator's
// shared pool books it (engine storageTier.reserve); the answer is in the
// booking worker's seconds. Model seconds become wall ones through the
// worker's epoch and scale, so workers started at different instants
// share one timeline.
func (s *StoreServer) book(q storeReq) (storeRep, int) {
	if !(q.Start >= 0) || q.Bytes < 0 || !(q.Scale > 0) || q.EpochNS <= 0 {
		return storeRep{Error: fmt.Sprintf("book: start %v, bytes %d, scale %v, epoch_ns %d; want start ≥ 0, bytes ≥ 0, scale > 0 and epoch_ns > 0", q.Start, q.Bytes, q.Scale, q.EpochNS)}, http.StatusBadRequest
	}
	if s.BandwidthBytes <= 0 {
		return storeRep{OK: true}, http.StatusOK
	}
	if !s.based {
		s.baseNS, s.based = q.EpochNS, true
	}
	offset := float64(q.EpochNS-s.baseNS) / 1e9 // the worker's model time 0 on the service's timeline
	start := offset + q.Start/q.Scale
	s.freeAt = max(start, s.freeAt) + float64(q.Bytes)/s.BandwidthBytes/q.Scale
	return storeRep{Free: (s.freeAt - offset) * q.Scale, Booked: true, OK: true}, http.StatusOK
}

// queue is how long the aggregate link is booked past a worker's instant
// q.Start (held lock; /storage/queue): the admission reply's
// storage_queue_ms, which the simulator's engine answers from its shared
// pool (engine Worker.storageQueueS), in the asking worker's seconds. It
// books nothing. Booked false when the pool's bandwidth is unlimited.
func (s *StoreServer) queue(q storeReq) (storeRep, int) {
	if !(q.Start >= 0) || !(q.Scale > 0) || q.EpochNS <= 0 {
		return storeRep{Error: fmt.Sprintf("queue: start %v, scale %v, epoch_ns %d; want start ≥ 0, scale > 0 and epoch_ns > 0", q.Start, q.Scale, q.EpochNS)}, http.StatusBadRequest
	}
	if s.BandwidthBytes <= 0 {
		return storeRep{OK: true}, http.StatusOK
	}
	if !s.based {
		return storeRep{Booked: true, OK: true}, http.StatusOK // nothing booked yet
	}
	at := float64(q.EpochNS-s.baseNS)/1e9 + q.Start/q.Scale
	return storeRep{Free: max(s.freeAt-at, 0) * q.Scale, Booked: true, OK: true}, http.StatusOK
}

// StoreClient is a worker's engine.StorageIndex over a StoreServer at a
// base URL. A call that fails (the service down, a bad answer) answers as
// an empty pool would — nothing matched, the write skipped — and is
// counted (Failures): the worker computes what it could not find.
type StoreClient struct {
	url      string
	hc       *http.Client
	failures atomic.Int64
	// The worker's clock, for bookings (SetClock): its model time 0 in
	// Unix nanoseconds and its time scale; no bookings before it is set.
	epochNS atomic.Int64
	scale   atomic.Uint64 // math.Float64bits
}

// NewStoreClient reaches the service at base (http://127.0.0.1:PORT).
func NewStoreClient(base string) *StoreClient {
	return &StoreClient{url: base, hc: &http.Client{Timeout: 5 * time.Second}}
}

// SetClock gives the client its worker's clock: the wall instant of model
// time 0 and the model seconds per wall second. The emulator sets it when
// the worker's driver starts; until then the client books nothing.
func (c *StoreClient) SetClock(epoch time.Time, scale float64) {
	c.scale.Store(math.Float64bits(scale))
	c.epochNS.Store(epoch.UnixNano())
}

// Book is engine.StorageBooker: the prefetch booked at the service, on
// the pool's aggregate link. A failed call books nothing (the worker's own
// link alone limits the prefetch) and is counted.
func (c *StoreClient) Book(start float64, bytes int64) (float64, bool) {
	epoch := c.epochNS.Load()
	if epoch == 0 {
		return 0, false
	}
	rep, err := c.call("/storage/book", storeReq{Start: start, Bytes: bytes, EpochNS: epoch, Scale: math.Float64frombits(c.scale.Load())})
	if err != nil || !rep.Booked {
		return 0, false
	}
	return rep.Free, true
}

// Queue is how long the pool's aggregate link is booked past now (the
// worker's model seconds): the time a prefetch asked now would wait
// behind those booked before it (StoreServer.queue). False when the pool's
// bandwidth is unlimited, the worker's clock is not set or the call
// failed (counted).
func (c *StoreClient) Queue(now float64) (float64, bool) {
	epoch := c.epochNS.Load()
	if epoch == 0 {
		return 0, false
	}
	rep, err := c.call("/storage/queue", storeReq{Start: now, EpochNS: epoch, Scale: math.Float64frombits(c.scale.Load())})
	if err != nil || !rep.Booked {
		return 0, false
	}
	return rep.Free, true
}

// Failures is the calls that got no answer.
func (c *StoreClient) Failures() int64 { return c.failures.Load() }

func (c *StoreClient) call(path string, q storeReq) (storeRep, error) {
	b, _ := json.Marshal(q)
	resp, err := c.hc.Post(c.url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		c.failures.Add(1)
		return storeRep{}, fmt.Errorf("storage pool %s: %w", c.url, err)
	}
	defer resp.Body.Close()
	var rep storeRep
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&rep); err != nil || resp.StatusCode != http.StatusOK {
		c.failures.Add(1)
		return storeRep{}, fmt.Errorf("storage pool %s%s: HTTP %d %s", c.url, path, resp.StatusCode, rep.Error)
	}
	return rep, nil
}

func (c *StoreClient) Open(blockSize int, capacity int64) (int64, error) {
	rep, err := c.call("/storage/open", storeReq{BlockSize: blockSize, Capacity: capacity})
	return rep.Capacity, err
}

func (c *StoreClient) Match(blocks []uint64, last int64) (int, int64) {
	rep, _ := c.call("/storage/match", storeReq{Blocks: blocks, Last: last})
	return rep.Blocks, rep.Tokens
}

func (c *StoreClient) Write(_ float64, blocks []uint64, last int64) (added, evicted int64, ok bool) {
	rep, _ := c.call("/storage/write", storeReq{Blocks: blocks, Last: last})
	return rep.Added, rep.Evicted, rep.OK
}

func (c *StoreClient) Touch(_ float64, blocks []uint64, last int64) {
	c.call("/storage/touch", storeReq{Blocks: blocks, Last: last})
}

func (c *StoreClient) Tokens() int64 {
	rep, _ := c.call("/storage/tokens", storeReq{})
	return rep.Tokens
}

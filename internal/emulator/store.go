package emulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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
// service orders its LRU by the order calls reach it, not by their times;
// the pool's aggregate bandwidth (a simulator knob) is not modelled here.

// storeReq and storeRep are the service's JSON bodies.
type storeReq struct {
	BlockSize int      `json:"block_size,omitempty"`
	Capacity  int64    `json:"capacity,omitempty"`
	Blocks    []uint64 `json:"blocks,omitempty"`
	Last      int64    `json:"last,omitempty"`
}

type storeRep struct {
	Capacity int64  `json:"capacity,omitempty"`
	Blocks   int    `json:"blocks,omitempty"`
	Tokens   int64  `json:"tokens,omitempty"`
	Added    int64  `json:"added,omitempty"`
	Evicted  int64  `json:"evicted,omitempty"`
	OK       bool   `json:"ok,omitempty"`
	Error    string `json:"error,omitempty"`
}

// StoreServer is the shared pool's index as a loopback HTTP service:
// POST /storage/{open,match,write,touch,tokens}. The first worker to open
// it sizes it.
type StoreServer struct {
	mu  sync.Mutex
	idx engine.StorageIndex
	bs  int
	seq float64 // the LRU's clock: one tick per call
}

// NewStoreServer is an empty pool's service.
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

// StoreClient is a worker's engine.StorageIndex over a StoreServer at a
// base URL. A call that fails (the service down, a bad answer) answers as
// an empty pool would — nothing matched, the write skipped — and is
// counted (Failures): the worker computes what it could not find.
type StoreClient struct {
	url      string
	hc       *http.Client
	failures atomic.Int64
}

// NewStoreClient reaches the service at base (http://127.0.0.1:PORT).
func NewStoreClient(base string) *StoreClient {
	return &StoreClient{url: base, hc: &http.Client{Timeout: 5 * time.Second}}
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

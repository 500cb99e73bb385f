package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// up --hicache-storage-shared gives the emulated workers one storage pool
// (a loopback service up serves, each worker reaching it through
// --hicache-storage-shared-url): a DP stack of two colocated workers with
// a Mooncake storage tier below a write_through host tier; one 2,048-token
// request (32 blocks of 64) lands on one worker, which writes its prompt's
// KV through to host and on to storage. With the pool shared both workers'
// /server_info read 2,048 tokens used in one pool, the one that never
// served the request included; without, that worker's pool of its own
// holds nothing. The verdict rests on the pools' contents, not timing.
func TestUpSharedStoragePool(t *testing.T) {
	for _, shared := range []bool{true, false} {
		args := []string{"--mechanism", "pd-colo", "--colo", "2", "--port", "0", "--time-scale", "20",
			"--worker-arg=--enable-hierarchical-cache", "--worker-arg=--hicache-storage-backend=mooncake"}
		if shared {
			args = append(args, "--hicache-storage-shared")
		}
		gw, children, _, _, stderr := startUp(t, args...)
		if len(children) != 2 {
			t.Fatalf("up named %d workers, want 2", len(children))
		}
		prompt := make([]int, 2048)
		for i := range prompt {
			prompt[i] = i + 11
		}
		b, _ := json.Marshal(map[string]any{"input_ids": prompt, "sampling_params": map[string]any{"max_new_tokens": 2}})
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Post(gw+"/generate", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("shared %v: /generate answered %d\n%s", shared, resp.StatusCode, stderr.String())
		}
		var used []int64
		for _, u := range children {
			var info struct {
				Storage struct {
					Used   int64 `json:"used_tokens"`
					Shared bool  `json:"shared"`
				} `json:"pdhybrid_storage"`
			}
			r, err := http.Get(u + "/server_info")
			if err != nil {
				t.Fatal(err)
			}
			err = json.NewDecoder(r.Body).Decode(&info)
			r.Body.Close()
			if err != nil || info.Storage.Shared != shared {
				t.Fatalf("shared %v: %s/server_info: %v, storage shared %v", shared, u, err, info.Storage.Shared)
			}
			used = append(used, info.Storage.Used)
		}
		// The prompt's 2,047 tokens the request cached (all but its last),
		// filed in whole blocks: 32 blocks, 2,048 tokens.
		want := map[bool][2]int64{true: {2048, 2048}}[shared]
		if shared && (used[0] != want[0] || used[1] != want[1]) {
			t.Fatalf("shared pool: the workers read %v tokens used, want %v", used, want)
		}
		if !shared && (used[0]+used[1] != 2048 || used[0] != 0 && used[1] != 0) {
			t.Fatalf("pools of their own: the workers hold %v tokens, want 2,048 on the one that served the request, 0 on the other", used)
		}
	}
}

// up's KVC gateways get the decoders' storage link (backend and prefetch
// policy, the last --worker-arg of each), so tier costing prices their
// storage answers; a decoder without a storage tier gives them none, and a
// --gateway-arg still comes last.
func TestUpStorageServeArgs(t *testing.T) {
	f := upFlags{mech: "kvcache-centric", hardware: "h200-141g", blockSize: 64, kvcPreset: "v4", tauAppend: 8192,
		workerArgs: []string{"--enable-hierarchical-cache", "decode:--hicache-storage-backend=hf3fs", "--hicache-storage-backend=mooncake",
			"decode:--hicache-storage-prefetch-policy=wait_complete"}, gatewayArgs: []string{"--hicache-storage-bandwidth=10"}}
	got := strings.Join(f.serveArgs(nil), " ")
	if !strings.HasSuffix(got, "--hicache-storage-backend mooncake --hicache-storage-prefetch-policy wait_complete --hicache-storage-bandwidth=10") {
		t.Errorf("gateway args %q: want the decoders' backend (mooncake, the last given) and policy, then the --gateway-arg", got)
	}
	f.gatewayArgs, f.storeShared, f.storeGBps = nil, true, 12.5
	if got := strings.Join(f.serveArgs(nil), " "); !strings.HasSuffix(got, "--hicache-storage-prefetch-policy wait_complete --hicache-storage-shared-bandwidth 12.5") {
		t.Errorf("gateway args %q: want the shared pool's aggregate bandwidth after the decoders' link", got)
	}
	f.storeGBps = 0
	if got := strings.Join(f.serveArgs(nil), " "); strings.Contains(got, "shared-bandwidth") {
		t.Errorf("gateway args %q: an unlimited pool, want no pool bandwidth", got)
	}
	f.workerArgs, f.gatewayArgs, f.storeGBps = []string{"prefill:--hicache-storage-backend=mooncake"}, nil, 12.5
	if got := strings.Join(f.serveArgs(nil), " "); strings.Contains(got, "storage") {
		t.Errorf("gateway args %q: no decoder has a storage tier, want no storage link", got)
	}
}

// serve --hicache-storage-shared-bandwidth is the tier cost's pool
// bandwidth, with which a storage answer's storage_queue_ms is priced;
// without it the queue is not priced.
func TestServeSharedPoolBandwidth(t *testing.T) {
	f := serveCostFlags{model: "qwen3-30b-a3b", hardware: "h200-141g", link: "rdma-400g", storage: "mooncake", prefetch: "wait_complete"}
	for _, c := range []struct {
		gbps, want float64
	}{{0, 0}, {12.5, 12.5e9}} {
		f.poolGBps = c.gbps
		_, tc, err := f.costs()
		if err != nil {
			t.Fatal(err)
		}
		if tc.StoragePoolBandwidth != c.want || tc.StorageBandwidth != 37.5e9 {
			t.Errorf("--hicache-storage-shared-bandwidth %v: pool %v B/s, storage link %v B/s; want %v and Mooncake's 37.5e9", c.gbps, tc.StoragePoolBandwidth, tc.StorageBandwidth, c.want)
		}
	}
}

package model

import (
	"fmt"
	"sort"
	"strings"
)

// GPU is one accelerator from its datasheet: dense (not sparse) tensor
// throughput, HBM capacity and bandwidth, and its links. Source names where
// every number came from.
type GPU struct {
	Name string
	// DenseBF16 and DenseFP8 are peak dense tensor FLOP/s (0 FP8: the GPU
	// has no FP8 tensor cores; FP8 weights then compute in bf16).
	DenseBF16, DenseFP8 float64
	// HBMBytes is the datasheet capacity; UsableBytes what the runtime
	// reports as total (cudaMemGetInfo), which the engines' fractions apply to.
	HBMBytes, UsableBytes int64
	HBMBandwidth          float64 // bytes/s
	// ScaleUp is the GPU-to-GPU link inside a node (NVLink, Infinity
	// Fabric, or PCIe where there is none), per direction, bytes/s.
	ScaleUpName      string
	ScaleUpBandwidth float64
	// ScaleUpPeerLatS and ScaleUpBaseLatS are one all-reduce's latency
	// over the link: base + peer·(TP−1) seconds. 0, 0: the per-peer
	// latency fitted to real runs on NVLink (Coefficients.CollectiveS),
	// which is what NVLink GPUs take; PCIe's are NCCL's own latency model
	// for a ring all-reduce in its LL protocol (the per-layer reductions
	// are small messages): base 6.6 µs, and 2 ring steps per peer at
	// 1.0 µs over PCI (NVIDIA/nccl src/graph/tuning.cc, baseLat and hwLat);
	// MI300X's Infinity Fabric takes RCCL's model for it the same way:
	// base 12.0 µs, 2 ring steps per peer at 0.8 µs (ROCm/rccl, the same
	// file's tuning_model_5).
	ScaleUpPeerLatS, ScaleUpBaseLatS float64
	// SMs is the streaming multiprocessor count where FlashAttention-3's
	// persistent decode schedule applies (Hopper; 0 elsewhere: vLLM runs
	// other attention kernels there, attntail.go).
	SMs    int
	Source string
}

// gpus is the datasheet table. Throughputs are the dense figures (NVIDIA
// and AMD quote "with sparsity" at twice these).
var gpus = map[string]GPU{
	"h100-sxm": {Name: "h100-sxm", DenseBF16: 989.4e12, DenseFP8: 1978.9e12,
		HBMBytes: 80e9, UsableBytes: 85_029_000_000, HBMBandwidth: 3.35e12,
		ScaleUpName: "nvlink4", ScaleUpBandwidth: 450e9, SMs: 132,
		Source: "NVIDIA H100 Tensor Core GPU datasheet (SXM5): BF16 1,979 / FP8 3,958 TFLOPS with sparsity (half dense), 80 GB HBM3 at 3.35 TB/s, NVLink 900 GB/s bidirectional, 132 SMs; usable 79.19 GiB as vLLM logs total_gpu_memory on an H100 80GB"},
	"h200": {Name: "h200", DenseBF16: 989.4e12, DenseFP8: 1978.9e12,
		HBMBytes: 141e9, UsableBytes: 150_109_880_320, HBMBandwidth: 4.8e12,
		ScaleUpName: "nvlink4", ScaleUpBandwidth: 450e9, SMs: 132,
		Source: "NVIDIA H200 Tensor Core GPU datasheet (SXM): BF16 1,979 / FP8 3,958 TFLOPS with sparsity, 141 GB HBM3e at 4.8 TB/s, NVLink 900 GB/s bidirectional, 132 SMs; usable bytes measured by torch.cuda.mem_get_info (calibration/data/triton)"},
	"b200": {Name: "b200", DenseBF16: 2.25e15, DenseFP8: 4.5e15,
		HBMBytes: 180e9, UsableBytes: 180e9 * 0.99, HBMBandwidth: 8e12,
		ScaleUpName: "nvlink5", ScaleUpBandwidth: 900e9,
		Source: "NVIDIA HGX B200 datasheet, per GPU (eight in a board): FP8 72 / BF16 36 PFLOPS with sparsity per board, 1.44 TB HBM3e at 64 TB/s per board, NVLink 5 1.8 TB/s bidirectional per GPU; usable bytes assumed 99 % of capacity (not measured)"},
	"a100-80g": {Name: "a100-80g", DenseBF16: 312e12,
		HBMBytes: 80e9, UsableBytes: 85_100_000_000, HBMBandwidth: 2.039e12,
		ScaleUpName: "nvlink3", ScaleUpBandwidth: 300e9,
		Source: "NVIDIA A100 Tensor Core GPU datasheet (80GB SXM): BF16 312 TFLOPS dense, no FP8, 80 GB HBM2e at 2,039 GB/s, NVLink 600 GB/s bidirectional; usable bytes assumed as the H100's 79.2 GiB (not measured)"},
	"l40s": {Name: "l40s", DenseBF16: 362.05e12, DenseFP8: 733e12,
		HBMBytes: 48e9, UsableBytes: 47_700_000_000, HBMBandwidth: 864e9,
		ScaleUpName: "pcie4", ScaleUpBandwidth: 32e9, ScaleUpPeerLatS: 2e-6, ScaleUpBaseLatS: 6.6e-6,
		Source: "NVIDIA L40S datasheet: BF16 362.05 / FP8 733 TFLOPS dense (733 / 1,466 with sparsity), 48 GB GDDR6 at 864 GB/s, no NVLink, PCIe Gen4 x16 64 GB/s bidirectional; usable bytes assumed 44.4 GiB (not measured); all-reduce latency over PCIe from NCCL's tuning model (src/graph/tuning.cc, ring LL: baseLat 6.6 us + hwLat[PCI] 1.0 us per ring step, 2 steps per peer)"},
	"mi300x": {Name: "mi300x", DenseBF16: 1307.4e12, DenseFP8: 2614.9e12,
		HBMBytes: 192e9, UsableBytes: 205_000_000_000, HBMBandwidth: 5.3e12,
		ScaleUpName: "infinity-fabric", ScaleUpBandwidth: 448e9, ScaleUpPeerLatS: 1.6e-6, ScaleUpBaseLatS: 12e-6,
		Source: "AMD Instinct MI300X datasheet: BF16 1,307.4 / FP8 2,614.9 TFLOPS dense, 192 GB HBM3 at 5.3 TB/s, 7 Infinity Fabric links of 128 GB/s bidirectional (896 GB/s peer aggregate); usable bytes assumed 191 GiB (not measured); all-reduce latency over Infinity Fabric from RCCL's tuning model, the datasheet giving none (ROCm/rccl src/graph/tuning.cc at 0cbce2a7, tuning_model_5, added for MI300X gfx942 8-GPU platforms: ring LL baseLat 12.0 us + hwLat[xGMI, typed NVLink] 0.8 us per ring step, 2 steps per peer)"},
}

// gpuAliases maps the built-in profiles' hardware names to the table.
var gpuAliases = map[string]string{
	"h100": "h100-sxm", "h100-80g": "h100-sxm", "h200-141g": "h200", "a100": "a100-80g", "b200-180g": "b200",
}

// LookupGPU finds a GPU in the datasheet table by name or alias.
func LookupGPU(name string) (GPU, error) {
	n := strings.ToLower(name)
	if a, ok := gpuAliases[n]; ok {
		n = a
	}
	g, ok := gpus[n]
	if !ok {
		return GPU{}, fmt.Errorf("unknown GPU %q; want one of %s", name, strings.Join(GPUNames(), ", "))
	}
	return g, nil
}

// GPUNames lists the datasheet table.
func GPUNames() []string {
	var out []string
	for n := range gpus {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Peak is the dense tensor throughput for weights in this many bits: FP8
// GEMMs where the GPU has them, bf16 otherwise.
func (g GPU) Peak(weightBits float64) float64 {
	if weightBits <= 8 && g.DenseFP8 > 0 {
		return g.DenseFP8
	}
	return g.DenseBF16
}

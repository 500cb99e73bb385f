package sim

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// BenchmarkSimTrace replays a converted trace named by PDHYBRID_TRACE
// (skipped when unset) as `pdhybrid sim --trace` does: the file is scanned
// for its sessions' last turns first (ScanSessionEnds), so sessions close
// after them, and then read again for the run. The file is held in memory.
// Its bytes and allocations per op are the CLI run's, less process start,
// the run folder and the trace's timestamp tail: the Mooncake
// target (≤ 0.1 s per mechanism) with every byte a request allocates.
func BenchmarkSimTrace(b *testing.B) {
	path := os.Getenv("PDHYBRID_TRACE")
	if path == "" {
		b.Skip("set PDHYBRID_TRACE to a converted trace (pdhybrid trace convert)")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	p := profile(b)
	for _, cfg := range append([]Config{
		{Name: "pd", Mechanism: PDDisaggregation, Prefill: 1, Decode: 3, Profile: p},
		{Name: "dp4-kv-aware", Mechanism: PDColo, Colo: 4, Policy: kvc.PolicyKVAware, Profile: p},
		{Name: "dp8-mixed", Mechanism: PDColo, Colo: 8, MixedChunk: true, Profile: p},
	}, kvcBench(p)...) {
		b.Run(cfg.Name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				scan, err := trace.NewReader(bytes.NewReader(data), path, 0)
				if err != nil {
					b.Fatal(err)
				}
				lasts, err := ScanSessionEnds(scan)
				if err != nil {
					b.Fatal(err)
				}
				rd, err := trace.NewReader(bytes.NewReader(data), path, 0)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Run(context.Background(), cfg, lasts.Source(rd), nil, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

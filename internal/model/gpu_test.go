package model

import (
	"strings"
	"testing"
)

// TestGPUTable holds the datasheet table to the list (H100 SXM,
// H200, B200, A100-80GB, L40S, MI300X) and to the datasheets' own figures,
// each written out here from the vendor's sheet: dense tensor FLOP/s (half
// the "with sparsity" figure the sheets lead with), HBM capacity and
// bandwidth, and the scale-up link per direction. A typo in the table, a
// sparse figure taken for a dense one, or a GPU dropped fails here.
func TestGPUTable(t *testing.T) {
	for _, c := range []struct {
		name         string
		bf16, fp8    float64 // dense TFLOP/s
		hbmGB, bwTBs float64
		link         string
		linkGBs      float64 // per direction
		sms          int
	}{
		{"h100-sxm", 989.4, 1978.9, 80, 3.35, "nvlink4", 450, 132},
		{"h200", 989.4, 1978.9, 141, 4.8, "nvlink4", 450, 132},
		{"b200", 2250, 4500, 180, 8, "nvlink5", 900, 0},
		{"a100-80g", 312, 0, 80, 2.039, "nvlink3", 300, 0},
		{"l40s", 362.05, 733, 48, 0.864, "pcie4", 32, 0},
		{"mi300x", 1307.4, 2614.9, 192, 5.3, "infinity-fabric", 448, 0},
	} {
		g, err := LookupGPU(c.name)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !near(g.DenseBF16, c.bf16*1e12, 1e-9) || !near(g.DenseFP8, c.fp8*1e12, 1e-9) {
			t.Errorf("%s: dense BF16 / FP8 %g / %g TFLOP/s, want %g / %g", c.name, g.DenseBF16/1e12, g.DenseFP8/1e12, c.bf16, c.fp8)
		}
		if !near(float64(g.HBMBytes), c.hbmGB*1e9, 1e-9) || !near(g.HBMBandwidth, c.bwTBs*1e12, 1e-9) {
			t.Errorf("%s: %g GB at %g TB/s, want %g GB at %g TB/s", c.name, float64(g.HBMBytes)/1e9, g.HBMBandwidth/1e12, c.hbmGB, c.bwTBs)
		}
		if g.ScaleUpName != c.link || !near(g.ScaleUpBandwidth, c.linkGBs*1e9, 1e-9) {
			t.Errorf("%s: link %s at %g GB/s, want %s at %g GB/s per direction", c.name, g.ScaleUpName, g.ScaleUpBandwidth/1e9, c.link, c.linkGBs)
		}
		if g.SMs != c.sms {
			t.Errorf("%s: %d SMs, want %d", c.name, g.SMs, c.sms)
		}
		// What the engines' fractions apply to cannot exceed the capacity
		// by more than GiB-vs-GB rounding (the runtime reports GiB-sized
		// totals a little above the sheet's decimal GB).
		if g.UsableBytes <= 0 || float64(g.UsableBytes) > 1.075*float64(g.HBMBytes) {
			t.Errorf("%s: usable %d bytes against %d on the sheet", c.name, g.UsableBytes, g.HBMBytes)
		}
		if !strings.Contains(strings.ToLower(g.Source), "datasheet") {
			t.Errorf("%s: source %q does not name its datasheet", c.name, g.Source)
		}
	}
	if n := len(GPUNames()); n < 6 {
		t.Errorf("%d GPUs in the table, want at least the issue's six", n)
	}
	// FP8 weights compute on FP8 tensor cores where there are some, in
	// BF16 where not (A100).
	a, _ := LookupGPU("a100")
	h, _ := LookupGPU("h100")
	if a.Peak(8) != a.DenseBF16 || h.Peak(8) != h.DenseFP8 || h.Peak(16) != h.DenseBF16 {
		t.Errorf("Peak: A100 fp8 %g, H100 fp8 %g, H100 bf16 %g", a.Peak(8), h.Peak(8), h.Peak(16))
	}
}

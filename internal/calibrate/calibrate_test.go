package calibrate

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/model"
)

func qwen() model.Model {
	return model.Model{Name: "qwen3-30b-a3b", Layers: 48, QHeads: 32, KVHeads: 4, HeadDim: 128,
		DTypeBytes: 2, Experts: 128, TopK: 8}
}

func near(a, b, rel float64) bool { return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b)) }

func TestNNLSRecoversExactCoefficients(t *testing.T) {
	want := []float64{0.0274, 1.77e-5, 2.35e-9}
	var A [][]float64
	var y []float64
	for _, n := range []int{128, 512, 2048, 8192, 32768} {
		for _, p := range []int{0, 4096, 131072} {
			f := PrefillFeatures(n, p)
			s := 0.0
			for j := range f {
				s += f[j] * want[j]
			}
			A = append(A, f)
			y = append(y, s)
		}
	}
	got, err := FitRelative(A, y)
	if err != nil {
		t.Fatal(err)
	}
	for j := range want {
		if !near(got[j], want[j], 1e-9) {
			t.Fatalf("coefficient %d = %v, want %v (all: %v)", j, got[j], want[j], got)
		}
	}
}

func TestNNLSClampsNegative(t *testing.T) {
	// y = 2 − x exactly: unconstrained least squares on [1, x] gives slope −1;
	// with slope ≥ 0 the best fit is slope 0 and intercept the mean of y.
	var A [][]float64
	var b []float64
	for x := 0.0; x <= 1.0; x += 0.25 {
		A = append(A, []float64{1, x})
		b = append(b, 2-x)
	}
	got, err := NNLS(A, b)
	if err != nil {
		t.Fatal(err)
	}
	if got[1] != 0 || !near(got[0], 1.5, 1e-12) {
		t.Fatalf("NNLS = %v, want [1.5 0]", got)
	}
	// And an all-positive problem matches plain least squares.
	got, err = NNLS([][]float64{{1, 0}, {0, 1}, {1, 1}}, []float64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if !near(got[0], 1, 1e-12) || !near(got[1], 2, 1e-12) {
		t.Fatalf("NNLS = %v, want [1 2]", got)
	}
}

func TestHoldoutDeterministic(t *testing.T) {
	keys := []string{}
	for _, n := range []int{128, 256, 512, 1024, 2048, 4096, 8192} {
		for _, p := range []int{0, 1024, 4096, 16384, 65536} {
			keys = append(keys, PrefillPoint{N: n, P: p}.Key())
		}
	}
	held := 0
	for _, k := range keys {
		h := Holdout(k, 3)
		for i := 0; i < 3; i++ {
			if Holdout(k, 3) != h {
				t.Fatalf("Holdout(%q) changed between calls", k)
			}
		}
		if h {
			held++
		}
		if Holdout(k, 1) || Holdout(k, 0) {
			t.Fatalf("k ≤ 1 must hold nothing out")
		}
	}
	if held < len(keys)/6 || held > len(keys)/2 {
		t.Fatalf("held out %d of %d, want about a third", held, len(keys))
	}
	// The split is a property of the key: these values must never change, or
	// the documented held-out errors would refer to another split.
	if got := fmt.Sprint(Holdout("prefill n=128 p=0", 3), Holdout("prefill n=2048 p=0", 3),
		Holdout("decode b=16 c=65536", 3), Holdout("decode b=128 c=1048576", 3)); got != "true false true false" {
		t.Fatalf("split changed: %s", got)
	}
}

func TestFitDataRecoversTiming(t *testing.T) {
	m := qwen()
	tm := model.Timing{PrefillOverheadS: 0.02, PrefillPerTokenS: 1.5e-5, PrefillAttnS: 2e-9,
		DecodeOverheadS: 0.008, DecodePerSeqS: 6e-6, DecodePerCtxTokenS: 2.4e-8, DecodeExpertsS: 0.02}
	l := model.Link{SetupS: 2e-5, BandwidthBytes: 2e12}
	d := &Data{}
	for _, n := range []int{128, 384, 1024, 4096, 16384, 32768} {
		for _, p := range []int{0, 2048, 32768, 131072} {
			d.Prefill = append(d.Prefill, PrefillPoint{N: n, P: p, Seconds: tm.PrefillS(n, p)})
		}
	}
	for _, b := range []int{1, 2, 4, 16, 64, 128} {
		for _, c := range []int64{1024, 16384, 262144, 1 << 20} {
			d.Decode = append(d.Decode, DecodePoint{Batch: b, Ctx: c, Seconds: tm.DecodeStepS(m, b, c)})
		}
	}
	for b := int64(1 << 20); b <= 1<<33; b *= 2 {
		d.Copy = append(d.Copy, CopyPoint{Kind: "d2d", Bytes: b, Chunks: 1, Seconds: l.TransferS(b)})
	}
	f, err := FitData(d, m, DefaultHoldout)
	if err != nil {
		t.Fatal(err)
	}
	g := f.Timing
	pairs := [][2]float64{
		{g.PrefillOverheadS, tm.PrefillOverheadS}, {g.PrefillPerTokenS, tm.PrefillPerTokenS},
		{g.PrefillAttnS, tm.PrefillAttnS}, {g.DecodeOverheadS, tm.DecodeOverheadS},
		{g.DecodePerSeqS, tm.DecodePerSeqS}, {g.DecodePerCtxTokenS, tm.DecodePerCtxTokenS},
		{g.DecodeExpertsS, tm.DecodeExpertsS},
	}
	for i, p := range pairs {
		if !near(p[0], p[1], 1e-8) {
			t.Fatalf("coefficient %d = %v, want %v (fit %+v)", i, p[0], p[1], g)
		}
	}
	gl := f.Links["d2d-h200"]
	if !near(gl.SetupS, l.SetupS, 1e-8) || !near(gl.BandwidthBytes, l.BandwidthBytes, 1e-8) {
		t.Fatalf("link = %+v, want %+v", gl, l)
	}
	for _, e := range f.Errors {
		if e.Test == 0 || e.Train == 0 || e.TestMAPE > 1e-9 || e.TrainMAPE > 1e-9 {
			t.Fatalf("exact data gave error %+v", e)
		}
	}
}

func TestLoadCSV(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("prefill.csv", "n,p,layers,model_s\n128,0,4,0.03\n2048,8192,4,0.1\n")
	write("decode.csv", "batch,ctx_tokens,seq_len,model_s\n16,65536,4096,0.024\n")
	write("copy.csv", "kind,bytes,chunks,seconds\nd2d,1048576,1,2.6e-5\n")
	write("meta.json", `{"device_name":"NVIDIA H200","mem_get_info_total":150109880320}`)
	d, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Prefill) != 2 || d.Prefill[1] != (PrefillPoint{N: 2048, P: 8192, Seconds: 0.1}) {
		t.Fatalf("prefill = %+v", d.Prefill)
	}
	if len(d.Decode) != 1 || d.Decode[0] != (DecodePoint{Batch: 16, Ctx: 65536, Seconds: 0.024}) {
		t.Fatalf("decode = %+v", d.Decode)
	}
	if len(d.Copy) != 1 || d.Copy[0].Bytes != 1<<20 || d.Meta["device_name"] != "NVIDIA H200" {
		t.Fatalf("copy = %+v meta = %v", d.Copy, d.Meta)
	}
	write("decode.csv", "batch,model_s\n1,0.01\n")
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "ctx_tokens") {
		t.Fatalf("missing column: err = %v", err)
	}
	if _, err := Load(t.TempDir()); err == nil {
		t.Fatal("empty folder accepted")
	}
}

// committedData is the folder the committed h200 profile is fitted to:
// prefill and decode measured with the Triton fused-MoE kernels and cuDNN
// prefill attention (--kernels triton --attn-prefill cudnn), copies copied
// from the run in calibration/data.
var committedData = filepath.Join("..", "..", "calibration", "data", "triton")

// Files that later runs copied unchanged from calibration/data: the cuDNN
// folder's decode and copies, the Triton folder's copies.
func TestCommittedDataSharesDecodeAndCopies(t *testing.T) {
	data := filepath.Join("..", "..", "calibration", "data")
	for _, f := range [][2]string{{"cudnn", "decode.csv"}, {"cudnn", "copy.csv"}, {"triton", "copy.csv"}} {
		a, err := os.ReadFile(filepath.Join(data, f[0], f[1]))
		if err != nil {
			t.Skip("no committed measurements:", err)
		}
		b, err := os.ReadFile(filepath.Join(data, f[1]))
		if err != nil {
			t.Fatal(err)
		}
		if string(a) != string(b) {
			t.Errorf("%s differs from calibration/data/%s: copy it again (docs/calibration.md)", filepath.Join(data, f[0], f[1]), f[1])
		}
	}
}

// The committed h200 profile must come from the committed measurements and
// meet the bar: ≤ 10% held-out MAPE for prefill and decode steps.
func TestCommittedProfileMeetsBar(t *testing.T) {
	dir := committedData
	if _, err := os.Stat(filepath.Join(dir, "prefill.csv")); err != nil {
		t.Skip("no committed measurements:", err)
	}
	d, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := model.Builtin("qwen3-30b-a3b", "h200-141g")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range Evaluate(d, p, DefaultHoldout) {
		seen[e.Op] = true
		if (e.Op == "prefill" || e.Op == "decode step") && (e.Test < 30 || e.TestMAPE > 0.10) {
			t.Errorf("%s: %d held-out points, MAPE %.1f%% (want ≥ 30 points, ≤ 10%%)", e.Op, e.Test, 100*e.TestMAPE)
		}
	}
	if !seen["prefill"] || !seen["decode step"] {
		t.Fatalf("committed data lacks prefill or decode points: %v", seen)
	}
	// Re-fitting the data gives the profile's coefficients (rounded to 4 digits).
	f, err := FitData(d, p.Model, DefaultHoldout)
	if err != nil {
		t.Fatal(err)
	}
	a, b := f.Timing, p.Timing
	for i, q := range [][2]float64{
		{a.PrefillOverheadS, b.PrefillOverheadS}, {a.PrefillPerTokenS, b.PrefillPerTokenS},
		{a.PrefillAttnS, b.PrefillAttnS}, {a.DecodeOverheadS, b.DecodeOverheadS},
		{a.DecodePerSeqS, b.DecodePerSeqS}, {a.DecodePerCtxTokenS, b.DecodePerCtxTokenS},
		{a.DecodeExpertsS, b.DecodeExpertsS},
		{eagerMedian(d), b.PrefillEagerS},
	} {
		if !near(q[0], q[1], 1e-3) {
			t.Errorf("coefficient %d: fit %v, profile %v: re-run `pdhybrid calibrate fit`", i, q[0], q[1])
		}
	}
}

// The roofline, its GPU-time coefficients fitted to the committed H200
// measurements, keeps the held-out bar of the linear fit: prefill and
// decode-step held-out MAPE ≤ 10 % (docs/calibration.md).
func TestRooflineMeetsBarOnH200(t *testing.T) {
	d, err := Load("../../calibration/data/triton")
	if err != nil {
		t.Fatal(err)
	}
	a, err := model.LoadHF("../../calibration/qwen3-30b-a3b.config.json")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := model.LookupGPU("h200")
	f, err := FitRoofline(d, a, model.Deployment{GPU: g, TP: 1}, model.DefaultCoefficients, DefaultHoldout, 30)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range f.Errors {
		if (e.Op == "prefill" || e.Op == "decode step") && e.TestMAPE > 0.10 {
			t.Errorf("%s held-out MAPE %.1f %%, want ≤ 10 %%", e.Op, 100*e.TestMAPE)
		}
	}
}

func eagerMedian(d *Data) float64 {
	m, _ := EagerPrefillS(d)
	return m
}

package metrics

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

func TestGapHistogramQuantilesWithinBucketWidth(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h GapHistogram
	var xs []float64
	for range 20000 {
		x := 0.02 * math.Exp(0.5*rng.NormFloat64()) // decode steps around 20 ms
		xs = append(xs, x)
		h.Add(x, 1)
	}
	sort.Float64s(xs)
	for _, q := range []float64{0.01, 0.5, 0.9, 0.95, 0.99} {
		want := xs[int(q*float64(len(xs)-1))]
		if got := h.Quantile(q); math.Abs(got-want)/want > 0.01 {
			t.Errorf("q%v = %v, want %v within 1%%", q, got, want)
		}
	}
	d := Describe(append([]float64(nil), xs...))
	if math.Abs(h.Mean()-d.Mean) > 1e-12 || math.Abs(h.Std()-d.Std) > 1e-9 || h.Count() != 20000 {
		t.Errorf("mean %v std %v count %d, want %v %v", h.Mean(), h.Std(), h.Count(), d.Mean, d.Std)
	}
	if h.Quantile(0) != xs[0] || h.Quantile(1) != xs[len(xs)-1] || h.Min() != xs[0] || h.Max() != xs[len(xs)-1] {
		t.Error("q0/q1 are not the exact min/max")
	}
}

func TestGapHistogramCountsAndMerge(t *testing.T) {
	var a, b, all GapHistogram
	a.Add(0.01, 100) // one decode run: 100 equal steps
	b.Add(0.05, 300)
	b.Add(0, 5)          // below the range
	b.Add(math.NaN(), 9) // ignored
	b.Add(1, 0)          // ignored
	all.Add(0.01, 100)
	all.Add(0.05, 300)
	all.Add(0, 5)
	a.Merge(&b)
	a.Merge(nil)
	if a.Count() != 405 || math.Abs(a.Mean()-all.Mean()) > 1e-15 || math.Abs(a.Std()-all.Std()) > 1e-12 {
		t.Fatalf("merged %d %v %v, want %d %v %v", a.Count(), a.Mean(), a.Std(), all.Count(), all.Mean(), all.Std())
	}
	if got := a.Quantile(0.5); math.Abs(got-0.05) > 0.0005 {
		t.Errorf("median %v, want 0.05", got)
	}
	if got := a.Quantile(0.1); math.Abs(got-0.01) > 0.0001 {
		t.Errorf("p10 %v, want 0.01", got)
	}
	if got := a.Quantile(0.001); got != 0 {
		t.Errorf("p0.1 %v, want the sub-microsecond gaps' 0", got)
	}
	var e GapHistogram
	if !math.IsNaN(e.Quantile(0.5)) || !math.IsNaN(a.Quantile(math.NaN())) || !math.IsNaN(a.Quantile(1.5)) || e.Std() != 0 {
		t.Error("empty histogram or bad q gave a number")
	}
}

// TestITLOnlyFromGaps: without a histogram the summary has no ITL (it is not
// TPOT); with one the *_itl_ms fields are its distribution in ms.
func TestITLOnlyFromGaps(t *testing.T) {
	c := NewCollector(SLO{})
	c.Add(&Record{Status: StatusCompleted, TTFTS: 0.5, LatencyS: 2, TPOTS: 0.1, OutputLength: 16})
	s := c.Summary(0)
	b, _ := json.Marshal(s)
	if s.MeanITLMs != nil || strings.Contains(string(b), "itl") {
		t.Fatalf("ITL without gaps: %s", b)
	}
	if !s.Complete || s.Stopped() {
		t.Fatal("a collector's summary is complete until the caller says otherwise")
	}
	h := NewGapHistogram()
	h.Add(0.02, 10)
	h.Add(0.04, 10)
	c.SetITL(h)
	s = c.Summary(0)
	if s.MeanITLMs == nil || math.Abs(*s.MeanITLMs-30) > 1e-9 || math.Abs(*s.P99ITLMs-40) > 0.4 || math.Abs(*s.StdITLMs-10) > 1e-9 {
		t.Fatalf("ITL %v %v %v", *s.MeanITLMs, *s.P99ITLMs, *s.StdITLMs)
	}
}

// TestRecordJSONNullLatencies: failed requests carry null latencies and
// their time to failure; both that form and the old one read back.
func TestRecordJSONNullLatencies(t *testing.T) {
	fail := Record{RequestID: "7", Status: StatusTimeout, LatencyS: 30, Error: "timeout: x", FinishReason: "abort"}
	b, err := json.Marshal(fail)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"ttft_s":null`, `"latency_s":null`, `"tpot_s":null`, `"ended_after_s":30`, `"request_id":"7"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	if strings.Count(string(b), `"ttft_s"`) != 1 {
		t.Errorf("ttft_s twice: %s", b)
	}
	var back Record
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, fail) {
		t.Fatalf("round trip %+v %v", back, err)
	}
	old := `{"request_id":"7","status":"timeout","ttft_s":0,"latency_s":30,"tpot_s":0}`
	var o Record
	if err := json.Unmarshal([]byte(old), &o); err != nil || o.LatencyS != 30 {
		t.Fatalf("old form %+v %v", o, err)
	}
	ok := Record{Status: StatusCompleted, TTFTS: 0.5, LatencyS: 2, TPOTS: 0.1}
	b, _ = json.Marshal(&ok)
	if !strings.Contains(string(b), `"ttft_s":0.5`) || strings.Contains(string(b), "ended_after_s") {
		t.Errorf("completed record %s", b)
	}
}

// TestGapSliceTable: every slice's bucket, found by walking the
// boundaries, is the logarithm's bucket of the slice's first float.
func TestGapSliceTable(t *testing.T) {
	for k, got := range gapSliceBucket {
		start := max(math.Float64frombits(uint64(k+gapFirstSlice)<<(52-gapSliceBits)), gapMin)
		if want := bucketLog(start); int(got) != want {
			t.Fatalf("slice %d (from %v): bucket %d, the logarithm says %d", k, start, got, want)
		}
	}
}

// BenchmarkGapTables is the package's start-up work: the slices' walk
// (the boundaries are a table); BenchmarkGapBounds is what finding the
// boundaries costs, which start-up paid before they were written out.
//
//	go test ./internal/metrics -run '^$' -bench 'Gap(Tables|Bounds)' -cpu 1
func BenchmarkGapTables(b *testing.B) {
	for b.Loop() {
		buildGapSlices()
	}
}

func BenchmarkGapBounds(b *testing.B) {
	for b.Loop() {
		computeGapBounds()
	}
}

// computeGapBounds finds each bucket's smallest float, the boundary
// bucketLog draws: from gapMin·gapRatio^i, stepped down while the float
// below is still in bucket i and up while this one is below it.
func computeGapBounds() []float64 {
	bound := make([]float64, gapBuckets)
	for i := range bound {
		x := max(gapMin*math.Exp(float64(i)*gapLogRatio), gapMin)
		for x > gapMin && bucketLog(math.Nextafter(x, 0)) >= i {
			x = math.Nextafter(x, 0)
		}
		for bucketLog(x) < i {
			x = math.Nextafter(x, math.Inf(1))
		}
		bound[i] = x
	}
	return bound
}

// TestGapBoundsTable: the written-out boundaries are, bit for bit, the ones
// bucketLog draws. After a change to gapMin, gapMax or gapRatio, rewrite
// the table with
//
//	PDHYBRID_WRITE_GAPBOUNDS=1 go test ./internal/metrics -run TestGapBoundsTable
func TestGapBoundsTable(t *testing.T) {
	want := computeGapBounds()
	if os.Getenv("PDHYBRID_WRITE_GAPBOUNDS") != "" {
		var b strings.Builder
		b.WriteString("// Code generated by TestGapBoundsTable (PDHYBRID_WRITE_GAPBOUNDS=1 go test ./internal/metrics -run TestGapBoundsTable); DO NOT EDIT.\n\npackage metrics\n\n")
		b.WriteString("// gapBound[i] is the smallest float64 in bucket i, the boundary bucketLog\n// draws, written out exactly (hexadecimal floats).\nvar gapBound = []float64{\n")
		for i, x := range want {
			if i%4 == 0 {
				b.WriteString("\t")
			}
			b.WriteString(strconv.FormatFloat(x, 'x', -1, 64))
			if i%4 == 3 || i == len(want)-1 {
				b.WriteString(",\n")
			} else {
				b.WriteString(", ")
			}
		}
		b.WriteString("}\n")
		if err := os.WriteFile("gapbounds.go", []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("wrote gapbounds.go; run the tests again")
		return
	}
	if len(gapBound) != len(want) {
		t.Fatalf("gapbounds.go has %d boundaries, the buckets are %d: rewrite it (PDHYBRID_WRITE_GAPBOUNDS=1)", len(gapBound), len(want))
	}
	for i := range want {
		if math.Float64bits(gapBound[i]) != math.Float64bits(want[i]) {
			t.Fatalf("boundary %d: table %v, bucketLog's %v: rewrite gapbounds.go (PDHYBRID_WRITE_GAPBOUNDS=1)", i, gapBound[i], want[i])
		}
	}
}

// TestBucketOfIsTheLogBucket: the table lookup gives the logarithm's bucket
// at and around every bucket boundary and across the whole range.
func TestBucketOfIsTheLogBucket(t *testing.T) {
	check := func(x float64) {
		if x < gapMin || x >= gapMax {
			return
		}
		if got, want := bucketOf(x), bucketLog(x); got != want {
			t.Fatalf("bucketOf(%v) = %d, the logarithm says %d", x, got, want)
		}
	}
	for _, b := range gapBound {
		x, y := b, b
		for range 64 {
			check(x)
			check(y)
			x, y = math.Nextafter(x, 0), math.Nextafter(y, math.Inf(1))
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		check(gapMin * math.Exp(rng.Float64()*math.Log(gapMax/gapMin)))
	}
}

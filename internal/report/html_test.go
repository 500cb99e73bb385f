package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// TestReportRenderDegenerate renders runs a real report can meet: nothing
// completed, a single request, a hostile name. The page must render, escape
// the name and contain no NaN or Inf.
func TestReportRenderDegenerate(t *testing.T) {
	allFailed := &Run{Name: "all failed", Mechanism: "kvcache-centric", Requests: []Request{
		{SessionID: "s", Turn: 1, ExecutionMode: "pd-router-fallback-no-d-capacity", Cause: "failed: no-space"},
	}, Summary: metrics.Summary{Requests: 1, Errors: 1, Failures: 1, FailureCauses: map[string]int{"failed: no-space": 1}}}
	one := &Run{Name: `<script>alert("x")</script>`, Requests: []Request{
		{SessionID: "s", Turn: 1, TTFTS: 0, LatencyS: 2, InputLength: 10, UncachedTokens: 0, CachedTokens: 10,
			ExecutionMode: "dp-colo-router", DecodeWorker: "colo-0", Completed: true},
	}, Workers: []WorkerSeries{{Worker: "colo-0", Role: "colocated", T: []float64{3}, Occ: []float64{0.5}}},
		Summary: metrics.Summary{Requests: 1, Completed: 1}}
	var b bytes.Buffer
	if err := Render(&b, []*Run{allFailed, one, allFailed}, Options{}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if strings.Contains(page, `<script>alert`) {
		t.Error("run name not escaped")
	}
	for _, bad := range []string{"NaN", "Inf", "ZgotmplZ"} {
		if strings.Contains(page, bad) {
			i := strings.Index(page, bad)
			t.Errorf("page contains %s near %q", bad, page[max(0, i-100):min(len(page), i+50)])
		}
	}
	if !strings.Contains(page, "all failed #2") {
		t.Error("repeated run name not made unique")
	}
	if err := Render(&b, nil, Options{}); err == nil {
		t.Error("rendering no runs should fail")
	}
}

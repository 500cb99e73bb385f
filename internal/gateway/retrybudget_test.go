package gateway

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The retry budget is exact: --retries N gives N attempts after the
// first, for a retryable status and for an unreachable prefill worker
// alike; the attempt after the last one answers the client.
func TestRetryBudgetExact(t *testing.T) {
	s := &Server{cfg: Config{Retries: 1}}
	for _, tc := range []struct {
		status, attempt int
		want            bool
	}{
		{503, 0, true}, {503, 1, false}, {500, 0, true}, {408, 0, true}, {429, 0, true},
		{499, 0, false}, {200, 0, false}, {400, 0, false},
	} {
		if got := s.retryable(&request{attempt: tc.attempt}, tc.status); got != tc.want {
			t.Errorf("retryable(status %d, attempt %d) = %v, want %v", tc.status, tc.attempt, got, tc.want)
		}
	}
	for _, attempt := range []int{0, 1} {
		q := &request{attempt: attempt}
		x := &pdRun{s: s, q: q, l: &life{s: s, ended: true}, p: Prefill{URL: "http://p"}}
		w := httptest.NewRecorder()
		x.prefillFailed(w, pdLeg{err: errors.New("prefill http://p unreachable: connection refused")})
		retried := q.retry != ""
		if want := attempt < 1; retried != want {
			t.Errorf("unreachable prefill, attempt %d: retried %v, want %v", attempt, retried, want)
		}
		if !retried && w.Code != http.StatusServiceUnavailable {
			t.Errorf("unreachable prefill, last attempt: answered %d, want 503", w.Code)
		}
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// up --mechanism pd-deflect deflects a queued prefill to a decoder live,
// with one time scale (1) for every worker and the replay: session a's
// 40,000-token first turn arrives at 0 s and takes P about 1.6 s (the H200
// profile); sessions b, c and d, 2,000 tokens each, arrive at 0.5, 0.6 and
// 0.7 s while it is there. Through P each would wait behind it, over the
// 100 ms TTFT SLO; on the decoder (conditional agg, slicing at the 100 ms
// TBT SLO) its prefill is one step of at most 100 ms, so each is deflected
// there (pd-deflect-prefill-on-d). a itself goes through P: on the decoder
// its chunks, sized to the TBT at 40,000 tokens of context, would take
// longer than P. The run folder records every request once, completed, in
// its execution mode; the report counts the modes. No timing is asserted.
func TestUpDeflects(t *testing.T) {
	tr := filepath.Join(t.TempDir(), "deflect.jsonl")
	lines := []string{`{"pdhybrid_trace":1,"block_size":64,"source":"test"}`}
	hash := 1
	for i, r := range []struct {
		session string
		at      float64
		n       int
	}{{"a", 0, 40000}, {"b", 0.5, 2000}, {"c", 0.6, 2000}, {"d", 0.7, 2000}} {
		ids := make([]int, (r.n+63)/64)
		for j := range ids {
			ids[j], hash = hash, hash+1
		}
		b, _ := json.Marshal(map[string]any{"session_id": r.session, "chat_id": i, "parent_chat_id": -1, "turn": 1, "timestamp": r.at,
			"input_length": r.n, "output_length": 8, "type": "text", "hash_ids": ids})
		lines = append(lines, string(b))
	}
	if err := os.WriteFile(tr, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "live")
	c := pdhybrid(t, "up", "--mechanism", "pd-deflect", "--decode", "1", "--port", "0", "--time-scale", "1",
		"--rival-ttft-slo-ms", "100", "--rival-tpot-slo-ms", "100", "--trace", tr, "--request-timeout", "30", "--out", dir)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		t.Fatalf("up: %v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct {
			Session string `json:"session_id"`
			Mode    string `json:"execution_mode"`
			Status  string `json:"status"`
			Error   string `json:"error"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("metrics.jsonl line %q: %v", l, err)
		}
		if _, dup := modes[r.Session]; dup || r.Status != "completed" {
			t.Errorf("session %s: status %s %s (recorded before: %v)", r.Session, r.Status, r.Error, dup)
		}
		modes[r.Session] = r.Mode
	}
	want := map[string]string{"a": kvc.ModeDeflectPD, "b": kvc.ModeDeflectD, "c": kvc.ModeDeflectD, "d": kvc.ModeDeflectD}
	if fmt.Sprint(modes) != fmt.Sprint(want) {
		t.Fatalf("execution modes %v, want %v\n%s", modes, want, stderr.String())
	}
	if !regexp.MustCompile(kvc.ModeDeflectD + ` +3\n`).MatchString(stdout.String()) {
		t.Errorf("up's summary does not count 3 deflected prefills:\n%s", stdout.String())
	}
}

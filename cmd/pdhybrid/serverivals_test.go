package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/emulator/emulatortest"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

// rivalCluster starts the peers' workers for the rivals: a stock prefill
// worker running pScale model seconds a wall second (slow, so a long
// prompt stays in its prefill while the test sends another) and a stock
// decoder with conditional aggregation and the decode radix cache.
func rivalCluster(t *testing.T, pScale float64) (p, d *emulator.Server) {
	t.Helper()
	p = emulatortest.StartWith(t, "127.0.0.1:0", engine.RolePrefill, func(c *emulator.Config) {
		emulatortest.Stock(c)
		c.TimeScale = pScale
	})
	d = emulatortest.StartWith(t, "127.0.0.1:0", engine.RoleDecode, func(c *emulator.Config) {
		emulatortest.Stock(c)
		c.ConditionalAgg, c.DecodeRadix = true, true
	})
	emulatortest.WaitHealthy(t, p.URL(), d.URL())
	return p, d
}

// post sends one /generate and returns its mode and output ids.
func post(t *testing.T, gw, session string, prompt []int) (string, []int) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"input_ids": prompt, "session_id": session, "sampling_params": map[string]any{"max_new_tokens": 8}})
	resp, err := http.Post(gw+"/generate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		OutputIDs []int `json:"output_ids"`
	}
	err = json.NewDecoder(resp.Body).Decode(&a)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || len(a.OutputIDs) != 8 {
		t.Fatalf("session %s: %d (%v), %d output ids, want 200 with 8", session, resp.StatusCode, err, len(a.OutputIDs))
	}
	return resp.Header.Get("X-PDHybrid-Mode"), a.OutputIDs
}

// occupyP sends session "busy"'s first turn of n tokens through the
// gateway and returns once the prefill worker holds it, so the next
// request the gateway routes sees n tokens queued on P; the request is
// cut when the test ends.
func occupyP(t *testing.T, gw string, p *emulator.Server, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	body, _ := json.Marshal(map[string]any{"input_ids": seq(500000, n), "session_id": "busy", "sampling_params": map[string]any{"max_new_tokens": 8}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gw+"/generate", bytes.NewReader(body))
	done := make(chan struct{})
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(p.URL() + "/get_load")
		if err != nil {
			t.Fatal(err)
		}
		var l []struct {
			Reqs int `json:"num_reqs"`
		}
		err = json.NewDecoder(resp.Body).Decode(&l)
		resp.Body.Close()
		if err == nil && len(l) > 0 && l[0].Reqs > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the prefill worker never took the long prompt")
		}
	}
}

func seq(first, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = first + i
	}
	return s
}

// serve runs pd-ppd with the engine's cost model: turn 1 through P; turn 2
// of the same session, while a 30,000-token prompt of another session is
// in P's prefill, on the decoder that holds turn 1: through P it would
// wait behind about 0.37 s of queued prefill (the H200 profile's per-token
// and step terms), on the decoder it costs a 40-token append, and the
// append's stall spread over 7 tokens against the 50 ms TPOT SLO weighs
// less than that gain against the 2 s TTFT SLO. Without a cost model both
// sides are 0 s and the turn goes through P.
func TestServePPD(t *testing.T) {
	p, d := rivalCluster(t, 0.05)
	gw := serveOn(t, p, d, "--mechanism", "pd-ppd")
	prompt := seq(7000, 1500)
	m, out := post(t, gw, "s", prompt)
	if m != kvc.ModePPDTurn1 {
		t.Fatalf("turn 1 in mode %q, want %s", m, kvc.ModePPDTurn1)
	}
	occupyP(t, gw, p, 30000)
	if m, _ := post(t, gw, "s", append(append(prompt, out...), 90000, 90001, 90002, 90003)); m != kvc.ModePPDLocal {
		t.Fatalf("turn 2 in mode %q, want %s on the decoder", m, kvc.ModePPDLocal)
	}
}

// serve runs pd-deflect with the engine's cost model, at a TTFT SLO of
// 100 ms and a TBT SLO of 100 ms: a 4,096-token prompt through an idle P
// takes 0.071 s (within the SLO: through P); the next, of another session,
// behind it 0.130 s (over: deflected to the decoder, where its one chunk's
// step, 0.094 s at 4,096 tokens of context, fits the TBT, so its TTFT is
// one 0.1 s step). Without a cost model every TTFT is 0 s and nothing is
// deflected.
func TestServeDeflect(t *testing.T) {
	p, d := rivalCluster(t, 0.02)
	gw := serveOn(t, p, d, "--mechanism", "pd-deflect", "--rival-ttft-slo-ms", "100", "--rival-tpot-slo-ms", "100")
	occupyP(t, gw, p, 4096)
	if m, _ := post(t, gw, "b", seq(70000, 4096)); m != kvc.ModeDeflectD {
		t.Fatalf("b in mode %q, want %s", m, kvc.ModeDeflectD)
	}
}

// The rivals' flags reach serve only with their mechanism.
func TestServeRivalFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rival-ttft-slo-ms", "100"}, "--rival-ttft-slo-ms"}, // kvcache-centric
		{[]string{"--mechanism", "pd-deflect", "--ppd-ttft-weight", "2"}, "--ppd-ttft-weight"},
		{[]string{"--mechanism", "pd-ppd", "--rival-tpot-slo-ms", "0"}, "--rival-tpot-slo-ms"},
		{[]string{"--mechanism", "pd-conditional", "--hardware", "h100-80g"}, "--hardware"},
	} {
		args := append([]string{"serve", "--prefill", "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2"}, tc.args...)
		_, se, err := runCLI(args...)
		if err == nil || !bytes.Contains([]byte(se), []byte(tc.want)) {
			t.Errorf("%v: err %v, stderr %q; want an error naming %s", tc.args, err, se, tc.want)
		}
	}
}

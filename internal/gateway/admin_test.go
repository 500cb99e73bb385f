package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pdhybrid/pdhybrid/internal/emulator"
	"github.com/pdhybrid/pdhybrid/internal/engine"
	"github.com/pdhybrid/pdhybrid/internal/kvc"
)

const token = "s3cret"

// admin calls an admin endpoint with tok as the bearer token ("" sends no
// Authorization) and decodes a JSON answer into out when non-nil.
func admin(t *testing.T, method, u, tok string, body any, out any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = strings.NewReader(string(j))
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %s: %v", method, u, b, err)
		}
	}
	if resp.StatusCode == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("401 without WWW-Authenticate")
	}
	return resp.StatusCode, string(b)
}

// The admin API is off without a configured token (404), and with one
// answers 401 without a token, 403 with a wrong one, 200 with the right
// one, on every endpoint, the GETs and each POST that changes the pool;
// /metrics and /health need none.
func TestAdminAuth(t *testing.T) {
	c := worker(t, engine.RoleColocated, false)
	off := testConfig(kvc.MechColo, nil, []*emulator.Server{c})
	off.LoadPoll = -1
	gwOff, _ := start(t, off)
	on := off
	on.AdminToken = token
	gwOn, _ := start(t, on)
	for _, tc := range []struct {
		gw, path, tok string
		want          int
	}{
		{gwOff.URL, "/admin/workers", "", http.StatusNotFound},
		{gwOff.URL, "/admin/workers", token, http.StatusNotFound},
		{gwOn.URL, "/admin/workers", "", http.StatusUnauthorized},
		{gwOn.URL, "/admin/sessions", "wrong", http.StatusForbidden},
		{gwOn.URL, "/admin/workers", "wrong", http.StatusForbidden},
		{gwOn.URL, "/admin/workers", token, http.StatusOK},
		{gwOn.URL, "/admin/sessions", token, http.StatusOK},
		{gwOn.URL, "/admin/nothing", token, http.StatusNotFound},
		{gwOn.URL, "/metrics", "", http.StatusOK},
		{gwOn.URL, "/health", "", http.StatusOK},
	} {
		if got, body := admin(t, http.MethodGet, tc.gw+tc.path, tc.tok, nil, nil); got != tc.want {
			t.Errorf("GET %s token %q (admin configured: %v): %d %s, want %d", tc.path, tc.tok, tc.gw == gwOn.URL, got, body, tc.want)
		}
	}
	// Every POST endpoint: no token 401, a wrong one 403 (a prefix of the
	// right one, the right one with a byte more, another scheme's), the API
	// off 404 — and none of them changes the pool.
	spare := worker(t, engine.RoleColocated, false)
	for _, op := range []string{"drain", "undrain", "add", "remove"} {
		body := map[string]any{"url": c.URL()}
		if op == "add" {
			body = map[string]any{"url": spare.URL(), "role": "colo"}
		}
		for _, tc := range []struct {
			gw, auth string
			want     int
		}{
			{gwOn.URL, "", http.StatusUnauthorized},
			{gwOn.URL, "Bearer ", http.StatusUnauthorized},
			{gwOn.URL, "Basic " + token, http.StatusUnauthorized},
			{gwOn.URL, "Bearer wrong", http.StatusForbidden},
			{gwOn.URL, "Bearer " + token[:len(token)-1], http.StatusForbidden},
			{gwOn.URL, "Bearer " + token + "x", http.StatusForbidden},
			{gwOff.URL, "Bearer " + token, http.StatusNotFound},
		} {
			j, _ := json.Marshal(body)
			req, _ := http.NewRequest(http.MethodPost, tc.gw+"/admin/workers/"+op, strings.NewReader(string(j)))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want || (tc.want == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "") {
				t.Errorf("POST %s with Authorization %q (admin configured: %v): %d %s, want %d", op, tc.auth, tc.gw == gwOn.URL, resp.StatusCode, b, tc.want)
			}
		}
	}
	var ws workersAnswer
	if st, b := admin(t, http.MethodGet, gwOn.URL+"/admin/workers", token, nil, &ws); st != http.StatusOK || len(ws.Workers) != 1 ||
		ws.Workers[0].URL != c.URL() || ws.Workers[0].State != "active" {
		t.Errorf("after refused changes: %d %s, want %s alone and active", st, b, c.URL())
	}
	// The right token does change it.
	if st, b := admin(t, http.MethodPost, gwOn.URL+"/admin/workers/add", token, map[string]any{"url": spare.URL(), "role": "colo"}, nil); st != http.StatusCreated {
		t.Errorf("add with the token: %d %s, want 201", st, b)
	}
	if got, _ := admin(t, http.MethodGet, gwOn.URL+"/admin/workers/drain", token, nil, nil); got != http.StatusMethodNotAllowed {
		t.Errorf("GET drain: %d, want 405", got)
	}
}

type workersAnswer struct {
	Workers []workerView `json:"workers"`
}

func workerState(t *testing.T, gw, url string) (workerView, bool) {
	t.Helper()
	var ws workersAnswer
	if st, b := admin(t, http.MethodGet, gw+"/admin/workers", token, nil, &ws); st != http.StatusOK {
		t.Fatalf("/admin/workers: %d %s", st, b)
	}
	for _, w := range ws.Workers {
		if w.URL == url {
			return w, true
		}
	}
	return workerView{}, false
}

// Draining a decoder really stops routing to it — its own session's next
// turn is reseeded on the other decoder, a new session avoids it — while
// undraining lets it back; a worker running a request is not removed
// (409) until it is idle; a decoder added at run time takes requests;
// /admin/sessions shows each session's decoder and turns.
func TestAdminDrainAddRemove(t *testing.T) {
	p := worker(t, engine.RolePrefill, false)
	d0, d1 := worker(t, engine.RoleDecode, true), worker(t, engine.RoleDecode, true)
	cfg := testConfig(kvc.MechKVC, []*emulator.Server{p}, []*emulator.Server{d0, d1})
	cfg.AdminToken, cfg.LoadPoll = token, -1
	gw, _ := start(t, cfg)
	req := func(sess string, from int) answer {
		a := generate(t, gw.URL, map[string]any{"input_ids": ids(from, 300), "session_id": sess, "sampling_params": map[string]any{"max_new_tokens": 4}})
		if a.status != http.StatusOK {
			t.Fatalf("session %s: %+v", sess, a)
		}
		return a
	}
	home := req("s", 1).worker
	other := d1.URL()
	if home == other {
		other = d0.URL()
	}
	if st, b := admin(t, http.MethodPost, gw.URL+"/admin/workers/drain", token, map[string]any{"url": home}, nil); st != http.StatusOK {
		t.Fatalf("drain: %d %s", st, b)
	}
	if w, _ := workerState(t, gw.URL, home); w.State != "draining" {
		t.Fatalf("after drain %s is %q", home, w.State)
	}
	for i, sess := range []string{"s", "t", "u"} {
		if a := req(sess, 1+i*1000); a.worker == home {
			t.Fatalf("session %s went to drained %s (%s)", sess, home, a.mode)
		}
	}
	var ss struct {
		Sessions []sessionView `json:"sessions"`
	}
	if st, b := admin(t, http.MethodGet, gw.URL+"/admin/sessions", token, nil, &ss); st != http.StatusOK || len(ss.Sessions) != 3 {
		t.Fatalf("/admin/sessions: %d %s", st, b)
	}
	for _, s := range ss.Sessions {
		want := map[string]int{"s": 2, "t": 1, "u": 1}[s.ID]
		if s.Turns != want || s.Decoder != other || s.LastSeen.IsZero() {
			t.Errorf("session %+v: want %d turns on %s, a last-seen time", s, want, other)
		}
	}
	admin(t, http.MethodPost, gw.URL+"/admin/workers/undrain", token, map[string]any{"url": home}, nil)
	if w, _ := workerState(t, gw.URL, home); w.State != "active" {
		t.Fatalf("after undrain %s is %q", home, w.State)
	}

	// A long stream on `other` keeps it busy: remove refuses.
	resp := post(t, gw.URL+"/generate", map[string]any{"input_ids": ids(1, 300), "session_id": "s", "stream": true,
		"sampling_params": map[string]any{"max_new_tokens": 3000}}, nil)
	defer resp.Body.Close()
	if resp.Header.Get("X-PDHybrid-Worker") != other {
		t.Fatalf("session s's stream went to %s, want %s", resp.Header.Get("X-PDHybrid-Worker"), other)
	}
	firstLine(t, resp)
	st, b := admin(t, http.MethodPost, gw.URL+"/admin/workers/remove", token, map[string]any{"url": other}, nil)
	if st != http.StatusConflict || !strings.Contains(b, "in flight") || !strings.Contains(b, "drain") {
		t.Fatalf("remove with a stream running: %d %s, want 409 saying to drain first", st, b)
	}
	admin(t, http.MethodPost, gw.URL+"/admin/workers/drain", token, map[string]any{"url": other}, nil)
	io.Copy(io.Discard, resp.Body)
	waitFor(t, func() bool { w, _ := workerState(t, gw.URL, other); return w.InFlight == 0 }, "idle drained worker")
	if st, b := admin(t, http.MethodPost, gw.URL+"/admin/workers/remove", token, map[string]any{"url": other}, nil); st != http.StatusOK {
		t.Fatalf("remove an idle worker: %d %s", st, b)
	}
	if _, listed := workerState(t, gw.URL, other); listed {
		t.Fatalf("removed %s still listed", other)
	}
	if st, _ := admin(t, http.MethodPost, gw.URL+"/admin/workers/drain", token, map[string]any{"url": other}, nil); st != http.StatusNotFound {
		t.Fatalf("drain a removed worker: %d, want 404", st)
	}
	// A removed worker loses its per-worker series; an added one has its
	// retry and abort series from the start.
	hasSeries := func(url string) (retries, aborts bool) {
		fams := scrape(t, gw.URL)
		_, retries = sample(fams, "pdhybrid_retries_total", map[string]string{"worker": url})
		_, aborts = sample(fams, "pdhybrid_aborts_total", map[string]string{"worker": url})
		return
	}
	if r, a := hasSeries(other); r || a {
		t.Errorf("removed %s still has series: retries %v, aborts %v", other, r, a)
	}

	// A third decoder added at run time, the first drained: it takes the
	// requests.
	d2 := worker(t, engine.RoleDecode, true)
	for _, tc := range []struct {
		body map[string]any
		want int
	}{
		{map[string]any{"url": d2.URL(), "role": "colo"}, http.StatusBadRequest},
		{map[string]any{"url": "not a url", "role": "decode"}, http.StatusBadRequest},
		{map[string]any{"url": home, "role": "decode"}, http.StatusConflict},
		{map[string]any{"url": d2.URL(), "role": "decode"}, http.StatusCreated},
	} {
		if st, b := admin(t, http.MethodPost, gw.URL+"/admin/workers/add", token, tc.body, nil); st != tc.want {
			t.Fatalf("add %v: %d %s, want %d", tc.body, st, b, tc.want)
		}
	}
	if r, a := hasSeries(d2.URL()); !r || !a {
		t.Errorf("added %s: retries series %v, aborts series %v, want both", d2.URL(), r, a)
	}
	admin(t, http.MethodPost, gw.URL+"/admin/workers/drain", token, map[string]any{"url": home}, nil)
	for i, sess := range []string{"s", "v"} {
		if a := req(sess, 5000+i*1000); a.worker != d2.URL() {
			t.Fatalf("session %s went to %s, want the added %s", sess, a.worker, d2.URL())
		}
	}
	// The removed decoder comes back in its old slot.
	if st, b := admin(t, http.MethodPost, gw.URL+"/admin/workers/add", token, map[string]any{"url": other, "role": "decode"}, nil); st != http.StatusOK {
		t.Fatalf("re-add %s: %d %s", other, st, b)
	}
	if w, ok := workerState(t, gw.URL, other); !ok || w.State != "active" {
		t.Fatalf("re-added %s: %+v listed %v", other, w, ok)
	}
	if r, a := hasSeries(other); !r || !a {
		t.Errorf("re-added %s: retries series %v, aborts series %v, want both", other, r, a)
	}
}

// No decoder left (all drained): requests fail with the cause, not hang.
func TestAdminAllDrained(t *testing.T) {
	c := worker(t, engine.RoleColocated, false)
	cfg := testConfig(kvc.MechColo, nil, []*emulator.Server{c})
	cfg.AdminToken, cfg.LoadPoll = token, -1
	gw, _ := start(t, cfg)
	admin(t, http.MethodPost, gw.URL+"/admin/workers/drain", token, map[string]any{"url": c.URL()}, nil)
	start := time.Now()
	resp := post(t, gw.URL+"/generate", map[string]any{"input_ids": ids(1, 10)}, nil)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "drained") {
		t.Fatalf("all drained: %d %s (%v), want 503 naming the drain", resp.StatusCode, b, time.Since(start))
	}
}

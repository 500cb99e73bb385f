package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUpStack: pdhybrid up runs a KVC stack in one process; a session's
// first request is seeded through P, its second goes direct to its decoder;
// SIGINT stops the whole stack with status 130.
func TestUpStack(t *testing.T) {
	c := pdhybrid(t, "up", "--mechanism", "kvcache-centric", "--prefill", "1", "--decode", "2", "--port", "0", "--time-scale", "20")
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		c.Process.Kill()
		<-exited
	})
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "listening ") {
				for _, f := range strings.Fields(l) {
					if v, ok := strings.CutPrefix(f, "url="); ok {
						url <- v
					}
				}
			}
		}
		io.Copy(io.Discard, out)
		exited <- c.Wait()
	}()
	var gw string
	select {
	case gw = <-url:
	case err := <-exited:
		exited <- err
		t.Fatalf("up exited: %v\n%s", err, stderr.String())
	case <-time.After(15 * time.Second):
		t.Fatal("up did not listen")
	}
	prompt := make([]int, 1500)
	for i := range prompt {
		prompt[i] = i + 7
	}
	ask := func(ids []int) (string, []int) {
		b, _ := json.Marshal(map[string]any{"input_ids": ids, "sampling_params": map[string]any{"max_new_tokens": 6}})
		req, _ := http.NewRequest(http.MethodPost, gw+"/generate", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Session-Id", "up-test")
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ans struct {
			OutputIDs []int `json:"output_ids"`
		}
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&ans) != nil {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return resp.Header.Get("X-PDHybrid-Mode"), ans.OutputIDs
	}
	mode, outIDs := ask(prompt)
	if mode != "pd-router-turn1-seed" {
		t.Fatalf("first request went %q", mode)
	}
	if mode, _ = ask(append(append(prompt, outIDs...), 90001, 90002, 90003)); mode != "kvcache-direct-to-d-session" {
		t.Fatalf("second request went %q", mode)
	}
	replayInto(t, gw)
	c.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
			t.Fatalf("up exited with %v after SIGINT, want %d\n%s", err, exitInterrupted, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("up did not stop on SIGINT")
	}
}

// replayInto replays a small trace through the live stack with pdhybrid
// replay: every request is in metrics.jsonl once and completed, the summary
// says complete, and pdhybrid report reads the folder.
func replayInto(t *testing.T, gw string) {
	t.Helper()
	tr := smallTrace(t)
	dir := filepath.Join(t.TempDir(), "live")
	so, se, err := runCLI("replay", "--url", gw, "--trace", tr, "--time-scale", "20", "--request-timeout", "20", "--out", dir)
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, se)
	}
	if !strings.Contains(so, "live") {
		t.Errorf("replay printed no summary table:\n%s", so)
	}
	b, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct {
			ChatID int64  `json:"chat_id"`
			Status string `json:"status"`
			Error  string `json:"error"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("metrics.jsonl line %q: %v", l, err)
		}
		if seen[r.ChatID] || r.Status != "completed" {
			t.Errorf("chat %d: status %s %s (seen before: %v)", r.ChatID, r.Status, r.Error, seen[r.ChatID])
		}
		seen[r.ChatID] = true
	}
	if len(seen) != 6 {
		t.Errorf("%d requests recorded; the trace has 6", len(seen))
	}
	var sum struct {
		Complete bool `json:"complete"`
		Requests int  `json:"requests"`
	}
	if b, err = os.ReadFile(filepath.Join(dir, "summary.json")); err != nil || json.Unmarshal(b, &sum) != nil || !sum.Complete || sum.Requests != 6 {
		t.Errorf("summary.json: %+v (%v)", sum, err)
	}
	if _, se, err := runCLI("report", dir, "--out", filepath.Join(t.TempDir(), "r")); err != nil {
		t.Errorf("report of the live run: %v\n%s", err, se)
	}
}

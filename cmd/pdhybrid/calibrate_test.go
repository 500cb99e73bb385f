package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/model"
)

// TestCalibrateFitAndCheck fits the committed measurements into a temporary
// profile, checks it loads and carries the measured links and sources, and
// that `calibrate check` on it passes the 10% bar.
func TestCalibrateFitAndCheck(t *testing.T) {
	data := filepath.Join("..", "..", defaultCalibrationData)
	if _, err := os.Stat(filepath.Join(data, "prefill.csv")); err != nil {
		t.Skip("no committed measurements:", err)
	}
	out := filepath.Join(t.TempDir(), "h200.json")
	var so, se bytes.Buffer
	e := &env{stdout: &so, stderr: &se}
	if err := runCalibrate(context.Background(), e, []string{"fit", "--data", data, "--out", out}); err != nil {
		t.Fatalf("fit: %v\n%s", err, se.String())
	}
	for _, want := range []string{"prefill", "decode step", "held-out MAPE", "d2d-h200", "nvlink"} {
		if !strings.Contains(so.String(), want) {
			t.Fatalf("fit output lacks %q:\n%s", want, so.String())
		}
	}
	p, err := model.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Links["d2d-h200"]; !ok || !strings.Contains(p.Sources["timing"], "calibrated on a real H200") {
		t.Fatalf("profile lacks the measured link or sources: %+v", p.Links)
	}
	if !strings.HasPrefix(p.Sources["timing.prefill_attn_s"], "cuDNN SDPA") {
		t.Fatalf("prefill attention source does not name cuDNN: %q", p.Sources["timing.prefill_attn_s"])
	}
	so.Reset()
	if err := runCalibrate(context.Background(), e, []string{"check", "--data", data, "--profile", out}); err != nil {
		t.Fatalf("check: %v\n%s", err, so.String())
	}
}

func TestCalibrateHelpListsFlags(t *testing.T) {
	for _, sub := range []string{"fit", "check"} {
		var so, se bytes.Buffer
		err := runCalibrate(context.Background(), &env{stdout: &so, stderr: &se}, []string{sub, "--help"})
		if !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%s --help: err = %v", sub, err)
		}
		for _, want := range []string{"-data folder", "-holdout k", "(default"} {
			if !strings.Contains(se.String(), want) {
				t.Fatalf("%s --help lacks %q:\n%s", sub, want, se.String())
			}
		}
	}
}

package main

import (
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
	so, se, err := runCLI("calibrate", "fit", "--data", data, "--out", out)
	if err != nil {
		t.Fatalf("fit: %v\n%s", err, se)
	}
	for _, want := range []string{"prefill", "decode step", "held-out MAPE", "d2d-h200", "nvlink"} {
		if !strings.Contains(so, want) {
			t.Fatalf("fit output lacks %q:\n%s", want, so)
		}
	}
	// The profile exists now: a second fit into it is refused without --force.
	if _, _, err := runCLI("calibrate", "fit", "--data", data, "--out", out); exitCode(err) != exitUsage {
		t.Fatalf("fit over an existing file: %v", err)
	}
	if _, se, err := runCLI("calibrate", "fit", "--data", data, "--out", out, "--force"); err != nil {
		t.Fatalf("fit --force: %v\n%s", err, se)
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
	if so, _, err := runCLI("calibrate", "check", "--data", data, "--profile", out); err != nil {
		t.Fatalf("check: %v\n%s", err, so)
	}
}

// TestCalibrateFitDefaultOut: without --out the fit writes a new file in
// the working directory, never the committed profile.
func TestCalibrateFitDefaultOut(t *testing.T) {
	if defaultFitOut != filepath.Base(defaultFitOut) || strings.Contains(defaultFitOut, "internal") {
		t.Fatalf("default --out %q is not a new file in the working directory", defaultFitOut)
	}
}

func TestCalibrateHelpListsFlags(t *testing.T) {
	for _, sub := range []string{"fit", "check"} {
		so, _, err := runCLI("calibrate", sub, "--help")
		if err != nil {
			t.Fatalf("%s --help: err = %v", sub, err)
		}
		for _, want := range []string{"--data folder", "--holdout k", "(default"} {
			if !strings.Contains(so, want) {
				t.Fatalf("%s --help lacks %q:\n%s", sub, want, so)
			}
		}
	}
}

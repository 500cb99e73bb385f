// Package calibrate turns GPU measurements (written by calibration/measure.py)
// into the engine model's timing coefficients and link parameters, and reports
// the model's error on points it was not fitted to.
package calibrate

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// PrefillPoint is one measured prefill: N new tokens after P cached ones,
// Seconds for the whole model (48 layers) including embedding and lm_head.
type PrefillPoint struct {
	N, P    int
	Seconds float64
	// Eager is the same step run eagerly (no CUDA graph), where measured
	// (prefill.csv's eager_model_s; 0 = not measured).
	Eager float64
}

// DecodePoint is one measured decode step: Batch sequences holding Ctx
// context tokens in all.
type DecodePoint struct {
	Batch   int
	Ctx     int64
	Seconds float64
}

// CopyPoint is one measured copy of Bytes in Chunks equal pieces over a path
// named Kind ("d2d": within one GPU; "p2p_0to1": GPU 0 to GPU 1).
type CopyPoint struct {
	Kind    string
	Bytes   int64
	Chunks  int
	Seconds float64
}

// Data is one measurement run.
type Data struct {
	Dir     string
	Prefill []PrefillPoint
	Decode  []DecodePoint
	Copy    []CopyPoint
	// Meta is the run's meta.json (versions, device, memory), if present.
	Meta map[string]any
}

// Load reads prefill.csv, decode.csv and copy.csv (each optional, at least
// one required) and meta.json from dir.
func Load(dir string) (*Data, error) {
	d := &Data{Dir: dir}
	found := 0
	err := readCSV(filepath.Join(dir, "prefill.csv"), []string{"n", "p", "model_s"}, func(v map[string]string) error {
		n, err1 := strconv.Atoi(v["n"])
		p, err2 := strconv.Atoi(v["p"])
		s, err3 := strconv.ParseFloat(v["model_s"], 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return err
		}
		var eager float64
		if v["eager_model_s"] != "" {
			var err error
			if eager, err = strconv.ParseFloat(v["eager_model_s"], 64); err != nil {
				return fmt.Errorf("eager_model_s: %w", err)
			}
		}
		d.Prefill = append(d.Prefill, PrefillPoint{N: n, P: p, Seconds: s, Eager: eager})
		return nil
	})
	if err == nil {
		found++
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	err = readCSV(filepath.Join(dir, "decode.csv"), []string{"batch", "ctx_tokens", "model_s"}, func(v map[string]string) error {
		b, err1 := strconv.Atoi(v["batch"])
		c, err2 := strconv.ParseInt(v["ctx_tokens"], 10, 64)
		s, err3 := strconv.ParseFloat(v["model_s"], 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return err
		}
		d.Decode = append(d.Decode, DecodePoint{Batch: b, Ctx: c, Seconds: s})
		return nil
	})
	if err == nil {
		found++
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	err = readCSV(filepath.Join(dir, "copy.csv"), []string{"kind", "bytes", "chunks", "seconds"}, func(v map[string]string) error {
		b, err1 := strconv.ParseInt(v["bytes"], 10, 64)
		c, err2 := strconv.Atoi(v["chunks"])
		s, err3 := strconv.ParseFloat(v["seconds"], 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return err
		}
		d.Copy = append(d.Copy, CopyPoint{Kind: v["kind"], Bytes: b, Chunks: c, Seconds: s})
		return nil
	})
	if err == nil {
		found++
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if found == 0 {
		return nil, fmt.Errorf("%s: no prefill.csv, decode.csv or copy.csv", dir)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "meta.json")); err == nil {
		if err := json.Unmarshal(b, &d.Meta); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "meta.json"), err)
		}
	}
	return d, nil
}

// readCSV calls row for every data line of path with the values keyed by the
// header's column names; want lists columns that must exist.
func readCSV(path string, want []string, row func(map[string]string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	head, err := r.Read()
	if err != nil {
		return fmt.Errorf("%s: header: %w", path, err)
	}
	for i := range head {
		head[i] = strings.TrimSpace(head[i])
	}
	for _, w := range want {
		ok := false
		for _, h := range head {
			ok = ok || h == w
		}
		if !ok {
			return fmt.Errorf("%s: no column %q (have %s)", path, w, strings.Join(head, ","))
		}
	}
	line := 1
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return nil
		}
		line++
		if err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
		v := make(map[string]string, len(head))
		for i, h := range head {
			if i < len(rec) {
				v[h] = strings.TrimSpace(rec[i])
			}
		}
		if err := row(v); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
}

// EagerPrefillS is the median of eager minus CUDA-graph time over the
// prefill points measured both ways, and how many there are: what a step
// with prefill work costs more when the engine runs it eagerly (SGLang's
// extend batches). 0 when no point has an eager time.
func EagerPrefillS(d *Data) (float64, int) {
	var v []float64
	for _, q := range d.Prefill {
		if q.Eager > 0 {
			v = append(v, q.Eager-q.Seconds)
		}
	}
	if len(v) == 0 {
		return 0, 0
	}
	sort.Float64s(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return m, len(v)
}

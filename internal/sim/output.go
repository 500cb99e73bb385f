package sim

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// DirSink writes a run folder: metrics.jsonl, structural/workers.jsonl and
// one structural JSONL file per kind of control-plane event (EventFiles);
// kinds without a file of their own go to structural/events.jsonl.
// summary.json and config.json are written by WriteRunFiles once the run is
// over.
type DirSink struct {
	files   []*os.File
	metrics *jsonl
	workers *jsonl
	events  *jsonl
	byKind  map[string]*jsonl
	all     []*jsonl
	line    []byte // metrics.jsonl's line, reused
}

// EventFiles maps an event kind to its file under structural/ (the seed's
// names): admission RPCs with mode, can_admit, reason, RTT and pause; the
// session→decoder binding of every turn; backpressure pauses; evictions
// with the tokens freed, the granularity and the session's state (idle, or
// hot: a request of it admitted or queued on that decoder, which only
// --trim any evicts); D→P snapshot sync stages.
var EventFiles = map[string]string{
	"admission":       "admission-events.jsonl",
	"session-binding": "session-d-binding.jsonl",
	"backpressure":    "backpressure-events.jsonl",
	"eviction":        "evictions.jsonl",
	"d-to-p-sync":     "d-to-p-sync.jsonl",
}

type jsonl struct {
	bw  *bufio.Writer
	enc *json.Encoder
}

func newJSONL(f *os.File) *jsonl {
	bw := bufio.NewWriterSize(f, 1<<20)
	return &jsonl{bw: bw, enc: json.NewEncoder(bw)}
}

// NewDirSink creates dir (and dir/structural) and opens the JSONL files.
func NewDirSink(dir string) (*DirSink, error) {
	if err := os.MkdirAll(filepath.Join(dir, "structural"), 0o755); err != nil {
		return nil, err
	}
	d := &DirSink{}
	open := func(name string) (*jsonl, error) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		d.files = append(d.files, f)
		j := newJSONL(f)
		d.all = append(d.all, j)
		return j, nil
	}
	var err error
	if d.metrics, err = open("metrics.jsonl"); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	if d.workers, err = open(filepath.Join("structural", "workers.jsonl")); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	if d.events, err = open(filepath.Join("structural", "events.jsonl")); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	d.byKind = map[string]*jsonl{}
	for kind, name := range EventFiles {
		if d.byKind[kind], err = open(filepath.Join("structural", name)); err != nil {
			return nil, errors.Join(err, d.Close())
		}
	}
	return d, nil
}

// Request writes r's line of metrics.jsonl (metrics.Record.AppendJSON: the
// bytes encoding/json would write, without its reflection).
func (d *DirSink) Request(r *metrics.Record) error {
	var err error
	if d.line, err = r.AppendJSON(d.line[:0]); err != nil {
		return err
	}
	_, err = d.metrics.bw.Write(d.line)
	return err
}
func (d *DirSink) Worker(w *metrics.WorkerSample) error { return d.workers.enc.Encode(w) }
func (d *DirSink) Event(e *metrics.Event) error {
	j := d.byKind[e.Kind]
	if j == nil {
		j = d.events
	}
	var err error
	if d.line, err = e.AppendJSON(d.line[:0]); err != nil {
		return err
	}
	_, err = j.bw.Write(d.line)
	return err
}

// Close flushes and closes every file.
func (d *DirSink) Close() error {
	var errs []error
	for _, j := range d.all {
		errs = append(errs, j.bw.Flush())
	}
	for _, f := range d.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// WriteRunFiles writes summary.json (the summary, plus per-worker and
// replay stats under "workers" and "replay") and config.json (the resolved
// config) into dir.
func WriteRunFiles(dir string, cfg Config, res *Result) error {
	cfg.Defaults()
	if err := writeJSON(filepath.Join(dir, "config.json"), cfg); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, "summary.json"), summaryFile{res.Summary, res.Workers, res.Replay})
}

// summaryFile flattens the summary's fields to the top level of
// summary.json, as the seed's and vLLM's tools expect.
type summaryFile struct {
	metrics.Summary
	Workers map[string]WorkerStats `json:"workers"`
	Replay  ReplayStats            `json:"replay"`
}

// MarshalJSON writes the summary's own fields (through its MarshalJSON,
// which writes an empty statistic as null) and then "workers" and
// "replay": without it the embedded Summary's method is promoted and the
// two are dropped from summary.json.
func (f summaryFile) MarshalJSON() ([]byte, error) {
	head, err := json.Marshal(f.Summary)
	if err != nil {
		return nil, err
	}
	tail, err := json.Marshal(struct {
		Workers map[string]WorkerStats `json:"workers"`
		Replay  ReplayStats            `json:"replay"`
	}{f.Workers, f.Replay})
	if err != nil {
		return nil, err
	}
	if len(head) < 2 || head[len(head)-1] != '}' || len(tail) < 2 || tail[0] != '{' {
		return nil, errors.New("summary.json: a summary that is not a JSON object")
	}
	if len(head) == 2 { // "{}"
		return tail, nil
	}
	out := append(head[:len(head)-1:len(head)-1], ',')
	return append(out, tail[1:]...), nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

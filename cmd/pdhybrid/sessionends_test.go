package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/sim"
	"github.com/pdhybrid/pdhybrid/internal/trace"
)

// TestScanSessionEndsRewinds: the scan of a trace file marks each
// session's last request and leaves the file at its start, so the run's
// own read sees every request; a trace on a pipe is not scanned.
func TestScanSessionEndsRewinds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := trace.NewWriter(f, trace.Header{Version: 1, BlockSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	reqs := []trace.Request{
		{SessionID: "a", ChatID: 1, ParentChatID: -1, Turn: 1, InputLength: 16, OutputLength: 1, HashIDs: []uint64{1}},
		{SessionID: "b", ChatID: 2, ParentChatID: -1, Turn: 1, Timestamp: 1, InputLength: 16, OutputLength: 1, HashIDs: []uint64{2}},
		{SessionID: "a", ChatID: 3, ParentChatID: 1, Turn: 2, Timestamp: 2, InputLength: 32, OutputLength: 1, HashIDs: []uint64{1, 3}},
	}
	for i := range reqs {
		if err := w.Write(&reqs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	lasts := scanSessionEnds(in, path, 0)
	if lasts == nil {
		t.Fatal("a regular trace file was not scanned")
	}
	rd, err := trace.NewReader(in, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	src := lasts.Source(rd)
	var got []bool
	for {
		var r trace.Request
		if err := src.Next(&r); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		got = append(got, src.(sim.SessionEnds).LastOfSession())
	}
	if want := []bool{false, true, true}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("after the scan the run read %v as last of session, want %v", got, want)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	pw.Close()
	if l := scanSessionEnds(pr, "pipe", 16); l != nil {
		t.Error("a pipe was scanned: the run could not read it again")
	}
}

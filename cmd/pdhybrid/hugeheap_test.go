package main

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func TestThpMode(t *testing.T) {
	for in, want := range map[string]string{
		"always [madvise] never\n": "madvise",
		"[always] madvise never\n": "always",
		"always madvise [never]\n": "never",
		"":                         "",
		"madvise":                  "",
		"] [":                      "",
	} {
		if got := thpMode([]byte(in)); got != want {
			t.Errorf("%q: mode %q, want %q", in, got, want)
		}
	}
}

func TestWantHugeHeap(t *testing.T) {
	for _, c := range []struct {
		godebug, mode string
		want          bool
	}{
		{"", "madvise", true},
		{"disablethp=0", "madvise", true},
		{"gctrace=1,disablethp=1", "madvise", false},
		{"disablethp=1", "madvise", false},
		{"", "always", false}, // huge pages already
		{"", "never", false},
		{"", "", false}, // no such setting
	} {
		if got := wantHugeHeap(c.godebug, c.mode); got != c.want {
			t.Errorf("GODEBUG %q, mode %q: %v, want %v", c.godebug, c.mode, got, c.want)
		}
	}
}

// TestAdviseHugeHeap: the block's range carries the kernel's huge-page
// flag (VmFlags "hg" in /proc/self/smaps), and the small objects allocated
// next are carved out of it, which is the point of the advice. It runs in
// a fresh process, as the advice does at a command's start: a test binary
// that has run other tests has freed memory below the block to fill first.
func TestAdviseHugeHeap(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("huge pages by advice are Linux's")
	}
	if os.Getenv("PDHYBRID_HUGEHEAP_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAdviseHugeHeap$", "-test.v")
		cmd.Env = append(os.Environ(), "PDHYBRID_HUGEHEAP_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if strings.Contains(string(out), "--- SKIP") {
			t.Skipf("%s", out)
		}
		return
	}
	const size = 16 << 20
	start, ok := adviseHugeHeap(size)
	if !ok {
		t.Skip("the kernel refuses MADV_HUGEPAGE (no transparent huge pages)")
	}
	end := start + size
	flagged, err := hugeFlagged(start, end)
	if err != nil {
		t.Fatal(err)
	}
	if !flagged {
		t.Fatalf("no mapping in [%#x, %#x) has the huge-page flag", start, end)
	}
	keep := make([]*[64]byte, 0, 50000)
	in := 0
	for range cap(keep) {
		p := new([64]byte)
		keep = append(keep, p)
		if a := uintptr(unsafe.Pointer(p)); a >= start && a < end {
			in++
		}
	}
	if in < len(keep)/4 { // the rest fill spans the test binary had begun
		t.Errorf("%d of %d new objects in the advised range [%#x, %#x)", in, len(keep), start, end)
	}
	runtime.KeepAlive(keep)
}

// hugeFlagged reports whether a mapping overlapping [start, end) has the
// "hg" VmFlag (MADV_HUGEPAGE).
func hugeFlagged(start, end uintptr) (bool, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var lo, hi uint64
	for sc.Scan() {
		line := sc.Text()
		if rng, _, ok := strings.Cut(line, " "); ok && !strings.HasSuffix(rng, ":") {
			a, b, _ := strings.Cut(rng, "-")
			x, err1 := strconv.ParseUint(a, 16, 64)
			y, err2 := strconv.ParseUint(b, 16, 64)
			if err1 == nil && err2 == nil { // a mapping's first line: its range
				lo, hi = x, y
			}
			continue
		}
		if strings.HasPrefix(line, "VmFlags:") && lo < uint64(end) && hi > uint64(start) {
			for _, fl := range strings.Fields(line)[1:] {
				if fl == "hg" {
					return true, nil
				}
			}
		}
	}
	return false, sc.Err()
}

// The simulator's commands, and only they, prepare the heap before the
// command tree is built.
func TestSimulatesNamesTheSimulatorsCommands(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"sim", "--trace", "x"}, true},
		{[]string{"bench"}, true},
		{[]string{"sweep", "--help"}, true},
		{[]string{"trace", "convert"}, false},
		{[]string{"serve"}, false},
		{[]string{"--version"}, false},
		{[]string{"simulate"}, false},
		{[]string{"help", "sim"}, false},
	} {
		if got := simulates(tc.args); got != tc.want {
			t.Errorf("simulates(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

package main

import (
	"bytes"
	"os"
	"strings"
)

// Huge pages for the heap a run fills before its first collection.
//
// With the collector held off for the first 64 MiB (heapHeadroom), every
// byte a small run allocates lands on a page the kernel has not given the
// process yet: a Mooncake run took 8,000–12,500 page faults, 11–14 % of
// its CPU on this project's VM (the fault, not the zeroing, is most of
// it). Go maps its heap with 4 KiB pages unless the kernel's transparent
// huge pages are "always"; the usual setting is "madvise", where only a
// range the process asks for (madvise MADV_HUGEPAGE) gets 2 MiB pages.
//
// So before the run the simulator's commands allocate one heapHeadroom
// block, mark it MADV_HUGEPAGE, drop it and hand it back to the OS
// (debug.FreeOSMemory: a collection of a near-empty heap, then the pages,
// never touched, returned). The runtime then carves the run's small
// objects out of that range first (it allocates from the lowest free
// address), where a fault brings in 2 MiB at once; and since the pages
// came back from the OS the runtime knows them to be zero and does not
// clear them again. Measured on Mooncake: ~80 % fewer faults and 8–12 %
// less CPU per mechanism, max RSS 3 MB higher (docs/simulator.md).
//
// Left alone: a GOGC the user sets (as the headroom is), GODEBUG's
// disablethp=1 (Go's own switch for huge pages off), and kernels whose
// setting is not "madvise" ("always" gives huge pages already, "never"
// none).

// thpSetting is where Linux says how transparent huge pages are used.
const thpSetting = "/sys/kernel/mm/transparent_hugepage/enabled"

// thpMode is the bracketed word of the setting's text ("always [madvise]
// never" → "madvise"); empty when there is none.
func thpMode(setting []byte) string {
	i := bytes.IndexByte(setting, '[')
	j := bytes.IndexByte(setting, ']')
	if i < 0 || j < i {
		return ""
	}
	return string(setting[i+1 : j])
}

// wantHugeHeap is whether to prepare huge pages, given GODEBUG's value and
// the kernel's mode.
func wantHugeHeap(godebug, mode string) bool {
	for _, kv := range strings.Split(godebug, ",") {
		if strings.TrimSpace(kv) == "disablethp=1" {
			return false
		}
	}
	return mode == "madvise"
}

// hugeHeap prepares size bytes of heap for huge pages when the kernel and
// GODEBUG allow it (see above); it reports whether it did.
func hugeHeap(size int) bool {
	setting, err := os.ReadFile(thpSetting)
	if err != nil || !wantHugeHeap(os.Getenv("GODEBUG"), thpMode(setting)) {
		return false
	}
	_, ok := adviseHugeHeap(size)
	return ok
}

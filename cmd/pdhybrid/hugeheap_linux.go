package main

import (
	"runtime/debug"
	"syscall"
	"unsafe"
)

// adviseHugeHeap marks a fresh size-byte block of heap MADV_HUGEPAGE and
// returns it to the runtime and the OS (hugeheap.go); it reports where the
// block was, and false when the kernel refuses the advice.
//
// The collector is off while the block is made, so that its size does not
// start a collection of its own before the one FreeOSMemory forces.
func adviseHugeHeap(size int) (start uintptr, ok bool) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	b := make([]byte, size) // fresh pages, never touched: the runtime does not clear them
	start = uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	err := syscall.Madvise(b, syscall.MADV_HUGEPAGE)
	b = nil
	debug.FreeOSMemory()
	return start, err == nil
}

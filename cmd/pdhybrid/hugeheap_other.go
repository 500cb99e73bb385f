//go:build !linux

package main

// adviseHugeHeap does nothing: huge pages by advice are Linux's.
func adviseHugeHeap(size int) (start uintptr, ok bool) { return 0, false }

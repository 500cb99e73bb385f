//go:build !linux

package main

import "syscall"

// childAttr puts a child in its own process group; without Linux's
// parent-death signal, up's own stop path is what ends it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

package main

import "syscall"

// childAttr puts a child in its own process group (so a Ctrl-C on the
// terminal reaches only up, which stops the children in order) and has the
// kernel kill it if up itself dies: no process is left behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

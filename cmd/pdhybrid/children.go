package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is one process `up` started: a worker or a gateway, itself
// `pdhybrid worker` or `pdhybrid serve`, which prints its listening line.
// A child that dies is started again (supervise) with the same arguments
// and the same ports, so the gateways' worker lists and the front's
// replica list stay true; cmd, exited and err then belong to the new
// process (guarded by children.mu).
type child struct {
	name     string
	args     []string
	cmd      *exec.Cmd
	url      string
	bootPort int
	exited   chan struct{} // closed when the process has ended
	err      error         // its Wait error, once exited is closed
	tail     *tailBuffer   // the end of its stderr, for error messages
	restarts int
}

// children owns the processes `up` started and stops every one of them.
type children struct {
	e        *env
	mu       sync.Mutex
	list     []*child
	stopping bool
	// backoff is the first wait before a restart (doubled per failed
	// restart, at most maxBackoff); 0 takes 500 ms.
	backoff time.Duration
}

// maxBackoff caps the wait between restarts of a child that keeps dying;
// a child that ran stableRun before it died starts over from backoff.
const (
	maxBackoff = 10 * time.Second
	stableRun  = 30 * time.Second
)

// start runs `pdhybrid args...` as name and waits (up to 30 s) for its
// "listening url=..." line. The child gets its own process group and, on
// Linux, is killed by the kernel if this process dies without stopping it.
func (cs *children) start(ctx context.Context, name string, args ...string) (*child, error) {
	c := &child{name: name, args: args, tail: &tailBuffer{max: 4096}}
	if err := cs.spawn(ctx, c, args); err != nil {
		return nil, err
	}
	cs.mu.Lock()
	cs.list = append(cs.list, c)
	cs.mu.Unlock()
	return c, nil
}

// spawn starts c's process with args and waits for its listening line.
func (cs *children) spawn(ctx context.Context, c *child, args []string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "PDHYBRID_AS_MAIN=1")
	cmd.SysProcAttr = childAttr()
	cmd.Stderr = io.MultiWriter(c.tail, &prefixWriter{w: cs.e.stderr, prefix: "[" + c.name + "] "})
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	exited := make(chan struct{})
	cs.mu.Lock()
	c.cmd, c.exited = cmd, exited
	cs.mu.Unlock()
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "listening ") {
				select {
				case listening <- l:
				default:
				}
			}
		}
		err := cmd.Wait()
		cs.mu.Lock()
		if c.cmd == cmd {
			c.err = err
		}
		cs.mu.Unlock()
		close(exited)
	}()
	kill := func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	select {
	case l := <-listening:
		for _, f := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(f, "url="); ok {
				c.url = v
			}
			if v, ok := strings.CutPrefix(f, "bootstrap_port="); ok {
				c.bootPort, _ = strconv.Atoi(v)
			}
		}
		return nil
	case <-exited:
		cs.mu.Lock()
		err := c.err
		cs.mu.Unlock()
		return fmt.Errorf("%s exited before it listened (%v): %s", c.name, err, strings.TrimSpace(c.tail.String()))
	case <-time.After(30 * time.Second):
		kill()
		return fmt.Errorf("%s did not listen within 30 s", c.name)
	case <-ctx.Done():
		kill()
		return ctx.Err()
	}
}

// supervise restarts every child that dies until ctx ends or stop is
// called: each death is logged on stderr, the child started again after a
// backoff (500 ms, doubling while restarts fail, at most 10 s), on the
// ports it had. Meanwhile the stack keeps serving: the gateways' health
// checks and breakers route around a dead worker, the front passes over a
// dead replica.
func (cs *children) supervise(ctx context.Context) {
	cs.mu.Lock()
	list := append([]*child(nil), cs.list...)
	cs.mu.Unlock()
	for _, c := range list {
		go cs.watch(ctx, c)
	}
}

func (cs *children) watch(ctx context.Context, c *child) {
	first := cs.backoff
	if first <= 0 {
		first = 500 * time.Millisecond
	}
	wait, since := first, time.Now()
	for {
		cs.mu.Lock()
		exited := c.exited
		cs.mu.Unlock()
		select {
		case <-exited:
		case <-ctx.Done():
			return
		}
		cs.mu.Lock()
		stopping, err := cs.stopping, c.err
		cs.mu.Unlock()
		if stopping || ctx.Err() != nil {
			return
		}
		if time.Since(since) >= stableRun {
			wait = first
		}
		for {
			fmt.Fprintf(cs.e.stderr, "[up] %s exited (%v): %s; restarting in %v\n", c.name, err, lastLine(c.tail.String()), wait)
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return
			}
			cs.mu.Lock()
			stopping = cs.stopping
			cs.mu.Unlock()
			if stopping {
				return
			}
			err = cs.spawn(ctx, c, c.restartArgs())
			if err == nil {
				break
			}
			wait = min(2*wait, maxBackoff)
		}
		since = time.Now()
		c.restarts++
		fmt.Fprintf(cs.e.stderr, "[up] %s restarted (restart %d) url=%s\n", c.name, c.restarts, c.url)
	}
}

// restartArgs are c's arguments with the ports it listened on: a worker
// comes back where the gateways look for it, a replica where the front
// does.
func (c *child) restartArgs() []string {
	args := append([]string(nil), c.args...)
	if u, err := url.Parse(c.url); err == nil && u.Port() != "" {
		args = setFlag(args, "--port", u.Port())
	}
	if c.bootPort != 0 {
		args = setFlag(args, "--bootstrap-port", strconv.Itoa(c.bootPort))
	}
	return args
}

// setFlag sets a "--name value" flag's value in args (the last one given,
// which is the one that wins), or appends it.
func setFlag(args []string, name, value string) []string {
	for i := len(args) - 2; i >= 0; i-- {
		if args[i] == name {
			args[i+1] = value
			return args
		}
	}
	return append(args, name, value)
}

// stop ends every child: SIGTERM (each drains), then SIGKILL for any still
// running after grace. It returns once all have exited.
func (cs *children) stop(grace time.Duration) {
	cs.mu.Lock()
	cs.stopping = true // no restart from here on
	type proc struct {
		cmd    *exec.Cmd
		exited chan struct{}
	}
	var list []proc
	for _, c := range cs.list {
		list = append(list, proc{c.cmd, c.exited})
	}
	cs.mu.Unlock()
	for i := len(list) - 1; i >= 0; i-- { // gateways first, then workers
		list[i].cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(grace)
	for _, c := range list {
		select {
		case <-c.exited:
		case <-deadline:
			for _, k := range list {
				syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
			}
			for _, k := range list {
				<-k.exited
			}
			return
		}
	}
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// prefixWriter writes each line with a prefix: the children's logs
// interleave on up's stderr, each line saying whose it is.
type prefixWriter struct {
	mu      sync.Mutex
	w       io.Writer
	prefix  string
	partial []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		if _, err := fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.partial[:i]); err != nil {
			return 0, err
		}
		p.partial = p.partial[i+1:]
	}
}

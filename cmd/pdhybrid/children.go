package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
type child struct {
	name     string
	cmd      *exec.Cmd
	url      string
	bootPort int
	exited   chan struct{} // closed when the process has ended
	err      error         // its Wait error, once exited is closed
	tail     *tailBuffer   // the end of its stderr, for error messages
}

// children owns the processes `up` started and stops every one of them.
type children struct {
	e    *env
	mu   sync.Mutex
	list []*child
}

// start runs `pdhybrid args...` as name and waits (up to 30 s) for its
// "listening url=..." line. The child gets its own process group and, on
// Linux, is killed by the kernel if this process dies without stopping it.
func (cs *children) start(ctx context.Context, name string, args ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := &child{name: name, cmd: exec.Command(exe, args...), exited: make(chan struct{}), tail: &tailBuffer{max: 4096}}
	c.cmd.Env = append(os.Environ(), "PDHYBRID_AS_MAIN=1")
	c.cmd.SysProcAttr = childAttr()
	c.cmd.Stderr = io.MultiWriter(c.tail, &prefixWriter{w: cs.e.stderr, prefix: "[" + name + "] "})
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cs.mu.Lock()
	cs.list = append(cs.list, c)
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
		c.err = c.cmd.Wait()
		close(c.exited)
	}()
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
		return c, nil
	case <-c.exited:
		return nil, fmt.Errorf("%s exited before it listened (%v): %s", name, c.err, strings.TrimSpace(c.tail.String()))
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("%s did not listen within 30 s", name)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// died is closed when any child ends; which says which one.
func (cs *children) died() (<-chan struct{}, func() *child) {
	cs.mu.Lock()
	list := append([]*child(nil), cs.list...)
	cs.mu.Unlock()
	any := make(chan struct{})
	var once sync.Once
	var first *child
	for _, c := range list {
		go func() {
			<-c.exited
			once.Do(func() { first = c; close(any) })
		}()
	}
	return any, func() *child { return first }
}

// stop ends every child: SIGTERM (each drains), then SIGKILL for any still
// running after grace. It returns once all have exited.
func (cs *children) stop(grace time.Duration) {
	cs.mu.Lock()
	list := cs.list
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

var errChildDied = errors.New("a process of the stack exited")

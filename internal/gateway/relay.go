package gateway

// Relaying a worker's answer to the client: JSON whole, SSE event by event.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// relay copies a worker's answer to the client unbuffered (each SSE event
// flushed as it comes), with the execution mode and worker in headers. A
// non-nil rewrite edits each JSON answer or SSE event's object on the way.
// It reports whether the copy completed, and whether anything reached the
// client: a JSON answer is read whole before its status goes out, so one
// cut short (the worker died), or one a non-nil void declares void once
// read (a decoder's abort answer after its prefill leg failed), leaves the
// client untouched and the request can be retried.
func relay(w http.ResponseWriter, resp *http.Response, mode, worker string, rewrite func(map[string]any), void func() bool) (ok, committed bool) {
	head := func() {
		for k, vs := range resp.Header {
			if k == "Content-Length" && rewrite != nil {
				continue
			}
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		w.Header().Set("X-PDHybrid-Mode", mode)
		w.Header().Set("X-PDHybrid-Worker", worker)
		w.WriteHeader(resp.StatusCode)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		if err != nil || void != nil && void() {
			return false, false
		}
		if rewrite != nil {
			b = rewriteJSON(b, rewrite)
		}
		head()
		_, err = w.Write(b)
		return err == nil, true
	}
	head()
	return relayEvents(w, resp, worker, rewrite), true
}

// relayEvents copies an SSE answer event by event, flushing each.
func relayEvents(w http.ResponseWriter, resp *http.Response, worker string, rewrite func(map[string]any)) bool {
	fl, _ := w.(http.Flusher)
	br := newLineReader(resp.Body)
	for {
		line, err := br()
		if len(line) > 0 {
			if rewrite != nil && bytes.HasPrefix(line, []byte("data: {")) {
				line = append([]byte("data: "), rewriteJSON(bytes.TrimSpace(line[len("data: "):]), rewrite)...)
				line = append(line, '\n')
			}
			if _, werr := w.Write(line); werr != nil {
				return false
			}
			if fl != nil && len(bytes.TrimSpace(line)) == 0 {
				fl.Flush() // an event ends at its blank line
			}
		}
		if err == io.EOF {
			if fl != nil {
				fl.Flush()
			}
			return true
		}
		if err != nil {
			// The worker's stream broke off: end the client's with an
			// error frame in SGLang's shape, not a silent truncation.
			msg, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "gateway: the worker's stream was cut", "code": http.StatusBadGateway}})
			fmt.Fprintf(w, "data: %s\n\n", msg)
			if fl != nil {
				fl.Flush()
			}
			return false
		}
	}
}

func rewriteJSON(b []byte, f func(map[string]any)) []byte {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return b
	}
	f(m)
	out, err := json.Marshal(m)
	if err != nil {
		return b
	}
	return out
}

// newLineReader returns successive lines of r, each with its newline.
func newLineReader(r io.Reader) func() ([]byte, error) {
	buf := make([]byte, 0, 4096)
	chunk := make([]byte, 32*1024)
	var pending []byte
	var readErr error
	return func() ([]byte, error) {
		for {
			if i := bytes.IndexByte(pending, '\n'); i >= 0 {
				line := append(buf[:0], pending[:i+1]...)
				pending = pending[i+1:]
				return line, nil
			}
			if readErr != nil {
				// A Read may return its last bytes together with the
				// error: the whole lines among them went out above, one
				// at a time; what is left is the unterminated tail.
				line := append(buf[:0], pending...)
				pending = nil
				return line, readErr
			}
			n, err := r.Read(chunk)
			pending = append(pending, chunk[:n]...)
			readErr = err
		}
	}
}

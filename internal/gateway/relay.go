package gateway

// Relaying a worker's answer to the client: JSON whole, SSE as it comes.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
)

// relay copies a worker's answer to the client unbuffered (SSE events
// flushed as they come), with the execution mode and worker in headers. A
// non-nil rewrite edits each JSON answer or SSE event's object on the way.
// It reports whether the copy completed, and whether anything reached the
// client: a JSON answer is read whole before its status goes out, so one
// cut short (the worker died), one the worker aborted (SGLang's
// finish_reason abort: a failure, never relayed as a 200), or one a
// non-nil void declares void once read (a decoder's abort answer after its
// prefill leg failed), leaves the client untouched and the request can be
// retried.
// The gateway's own answer headers, in the canonical form Header.Set
// gives them (so the bytes on the wire are as before): set as map keys,
// not canonicalized anew, an allocation each, on every answer.
const (
	hdrMode   = "X-Pdhybrid-Mode"
	hdrWorker = "X-Pdhybrid-Worker"
)

func relay(w http.ResponseWriter, resp *http.Response, mode, worker string, rewrite func(map[string]any), void func() bool) (ok, committed bool) {
	head := func() {
		h := w.Header()
		for k, vs := range resp.Header {
			if k == "Content-Length" && rewrite != nil || len(vs) == 0 {
				continue
			}
			// As Header.Add of each value, without a slice allocated
			// per header: the worker's values are shared, capped so that
			// a later Add copies them.
			ck := textproto.CanonicalMIMEHeaderKey(k)
			if old, ok := h[ck]; ok {
				h[ck] = append(old, vs...)
			} else {
				h[ck] = vs[:len(vs):len(vs)]
			}
		}
		h[hdrMode] = []string{mode}
		h[hdrWorker] = []string{worker}
		w.WriteHeader(resp.StatusCode)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		if err != nil || void != nil && void() || resp.StatusCode == http.StatusOK && aborted(b) {
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
	if rec, isRec := w.(*recorder); isRec && rec.s.direct != nil && rewrite == nil && void == nil && resp.StatusCode == http.StatusOK {
		if ok, handled := rec.s.direct.take(rec, resp); handled {
			return ok, true // relaydirect.go
		}
	}
	return relayEvents(w, resp, rewrite), true
}

// relayEvents copies an SSE answer as it comes: whatever one read of the
// worker's stream brought, its complete lines in one write and one flush
// (a plain reverse proxy's cost: one read, one write), each line passed
// through untouched unless rewrite edits data events. The stream ends in
// exactly one terminal event: [DONE], or an error frame in SGLang's shape
// (the worker's own, an abort turned into one, or the gateway's when the
// worker's stream broke off); nothing after it is relayed. It reports
// whether the worker's answer ended in [DONE].
func relayEvents(w http.ResponseWriter, resp *http.Response, rewrite func(map[string]any)) bool {
	fl, _ := w.(http.Flusher)
	bufp := relayBufs.Get().(*[]byte)
	buf := (*bufp)[:0]
	defer func() {
		if cap(buf) <= 64<<10 { // one long line's buffer is not kept
			*bufp = buf[:0]
			relayBufs.Put(bufp)
		}
	}()
	var eb eventBatch
	flush := func(b []byte) bool {
		if len(b) == 0 {
			return true
		}
		if _, err := w.Write(b); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // a line longer than the buffer: grow
		}
		n, err := resp.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		sent, end := eb.lines(buf, rewrite)
		if !flush(sent) {
			return false
		}
		buf = append(buf[:0], buf[end:]...)
		if eb.ended {
			// One terminal event: what the worker sends after it (a
			// second [DONE], an error as its connection is cut) is not
			// relayed.
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			return eb.done
		}
		if err == io.EOF {
			if len(buf) > 0 {
				flush(append(buf, '\n'))
			}
			// The worker ended its stream without a terminal event:
			// the client hears it was cut.
			flush(sseError("the worker's stream ended before its answer finished"))
			return false
		}
		if err != nil {
			// The worker's stream broke off: end the client's with an
			// error frame in SGLang's shape, not a silent truncation.
			flush(sseError("the worker's stream was cut"))
			return false
		}
	}
}

// eventBatch passes an SSE stream's lines through, batch by batch, up to
// and including its one terminal event: the ordinary relay and the direct
// one (relaydirect.go) share it, so both end a stream alike.
type eventBatch struct {
	out   []byte // a batch's output when a line was edited
	ended bool   // the terminal event has gone out: nothing more does
	done  bool   // it was [DONE]
}

// lines takes the complete lines at the start of buf (an unterminated tail
// waits for the rest) and returns what of them goes to the client — buf's
// own bytes unless a line was edited — and how many bytes of buf they were.
// Once ended, it returns nothing.
func (eb *eventBatch) lines(buf []byte, rewrite func(map[string]any)) (sent []byte, end int) {
	end = bytes.LastIndexByte(buf, '\n') + 1
	if eb.ended {
		return nil, end
	}
	lines, edited := buf[:end], false
	eb.out = eb.out[:0]
	for rest, start := lines, 0; len(rest) > 0 && !eb.ended; {
		i := bytes.IndexByte(rest, '\n') + 1
		line := rest[:i]
		rest = rest[i:]
		repl, terminal := eventLine(line, rewrite)
		if terminal || repl != nil {
			if !edited {
				eb.out = append(eb.out, lines[:start]...)
				edited = true
			}
			if repl != nil {
				eb.out = append(eb.out, repl...)
			} else {
				eb.out = append(eb.out, line...)
			}
			if terminal {
				// The event's blank line, whether or not the worker's
				// came in this read: nothing after the line is read.
				eb.ended = true
				eb.done = repl == nil && bytes.HasPrefix(line, []byte("data: [DONE]"))
				eb.out = append(eb.out, '\n')
			}
		} else if edited {
			eb.out = append(eb.out, line...)
		}
		start += i
	}
	if edited {
		return eb.out, end
	}
	return lines, end
}

// relayBufs holds the relays' read buffers, reused across requests.
var relayBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// eventLine classifies one SSE line: a terminal event ([DONE], an error
// frame, or a data event whose finish_reason is abort, returned as an
// error frame), or a data event rewrite edits (its replacement). Other
// lines pass untouched (nil, false).
func eventLine(line []byte, rewrite func(map[string]any)) (repl []byte, terminal bool) {
	if !bytes.HasPrefix(line, []byte("data: ")) {
		return nil, false
	}
	data := bytes.TrimSpace(line[len("data: "):])
	switch {
	case bytes.Equal(data, []byte("[DONE]")):
		return nil, true
	case len(data) == 0 || data[0] != '{':
		return nil, false
	case bytes.HasPrefix(data, []byte(`{"error"`)):
		return nil, true
	case bytes.Contains(data, []byte(`"abort"`)) && aborted(data):
		return sseErrorLine("the worker aborted the request: " + abortMessage(data)), true
	}
	if rewrite == nil {
		return nil, false
	}
	return append(append([]byte("data: "), rewriteJSON(data, rewrite)...), '\n'), false
}

// sseError is an error event in SGLang's shape (a 502: the worker failed).
func sseError(msg string) []byte { return append(sseErrorLine(msg), '\n') }

// sseErrorLine is an error event's data line.
func sseErrorLine(msg string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "gateway: " + msg, "code": http.StatusBadGateway}})
	return append(append([]byte("data: "), b...), '\n')
}

// aborted reports whether an SGLang answer (or one SSE event's object)
// finished with finish_reason abort: the worker gave up on it.
func aborted(b []byte) bool {
	if !bytes.Contains(b, []byte(`"abort"`)) {
		return false
	}
	var ans struct {
		MetaInfo struct {
			FinishReason *struct {
				Type string `json:"type"`
			} `json:"finish_reason"`
		} `json:"meta_info"`
	}
	return json.Unmarshal(bytes.TrimSpace(b), &ans) == nil && ans.MetaInfo.FinishReason != nil && ans.MetaInfo.FinishReason.Type == "abort"
}

// abortMessage is an abort's own message, if it gives one.
func abortMessage(b []byte) string {
	var ans struct {
		MetaInfo struct {
			FinishReason struct {
				Message string `json:"message"`
			} `json:"finish_reason"`
		} `json:"meta_info"`
	}
	json.Unmarshal(bytes.TrimSpace(b), &ans)
	if ans.MetaInfo.FinishReason.Message == "" {
		return "no reason given"
	}
	return ans.MetaInfo.FinishReason.Message
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

package conformance

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"time"
)

// kvEventsPath is the KV event stream (docs/worker-protocol.md, "KV
// events", revision 1.2).
const kvEventsPath = "/kvc/kv_events"

// kvEvents checks a decoder's KV event stream: advertised as kv_events
// exactly when the path exists, a bad after refused 400, and the stream
// opened as SSE (its first line read; the stream itself never ends, so
// the check stops there).
func (r *run) kvEvents() {
	const rule = "extension.kv-events.advertised"
	_, fs := r.advertised()
	p := r.call(http.MethodGet, kvEventsPath+"?after=x", nil)
	if p.err != nil {
		r.add(rule, Fail, "probe of %s: %v", kvEventsPath, p.err)
		return
	}
	exists := p.status != http.StatusNotFound
	switch {
	case fs["kv_events"] && !exists:
		r.add(rule, Fail, "kvc_protocol advertises kv_events but %s answers 404", kvEventsPath)
		return
	case !fs["kv_events"] && exists:
		r.add(rule, Fail, "%s answers %d, but kvc_protocol does not advertise kv_events (a path not offered must answer 404)", kvEventsPath, p.status)
		return
	case !exists:
		r.add(rule, NotOffered, "%s: 404 and not advertised (stock SGLang)", kvEventsPath)
		return
	case p.status != http.StatusBadRequest:
		r.add(rule, Fail, "%s?after=x answered %s, want 400 (after must be a sequence number)", kvEventsPath, p.short())
		return
	}
	r.add(rule, Pass, "advertised as kv_events; after=x is refused 400")
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+kvEventsPath, nil)
	if err != nil {
		r.add("extension.kv-events.stream", Fail, "%v", err)
		return
	}
	resp, err := r.client.Do(req)
	if err != nil {
		r.add("extension.kv-events.stream", Fail, "GET %s: %v", kvEventsPath, err)
		return
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	ct := resp.Header.Get("Content-Type")
	switch {
	case resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream"):
		r.add("extension.kv-events.stream", Fail, "GET %s: %d %s, want 200 text/event-stream", kvEventsPath, resp.StatusCode, ct)
	case err != nil || !strings.HasPrefix(line, ":"):
		r.add("extension.kv-events.stream", Fail, "the stream opened with %q (%v), want an SSE comment line at once", line, err)
	default:
		r.add("extension.kv-events.stream", Pass, "text/event-stream, opened with a comment")
	}
}

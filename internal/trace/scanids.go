package trace

import (
	"bytes"
	"errors"
)

// Reading only the ids. The simulator reads a trace file once before its
// run to learn each session's last request (sim.ScanSessionEnds), and that
// pass needs two fields of a line: its session id and chat id. Decoding
// the whole line (timestamps through strconv, every hash id) was a third of
// a 100K-request run's trace reading, paid a second time by the run itself.
// NextIDs reads the same lines as Next and the two fields as Next reads
// them (the same bytes: the scan hashes them), skipping every other value,
// and a canonical hash_ids array with one search for its closing bracket.
//
// It checks the line's JSON structure, not what Next checks beyond it (a
// missing timestamp, a float where an integer goes inside hash_ids): the
// scan's caller reads the file again with Next, whose checks stop the run
// at such a line, so a line that NextIDs passes and Next refuses never
// reaches the simulation.

// NextIDs reads the next request's session id (nil when the line has none
// or it is null) and chat id. The session id's bytes are valid until the
// next call. It returns io.EOF at the end, and an *Error for a line whose
// JSON it cannot follow or that has no chat id.
func (r *Reader) NextIDs() (session []byte, chat int64, err error) {
	for {
		var line []byte
		if r.pending != nil {
			line, r.pending = r.pending, nil
		} else {
			line, err = r.readLine()
			if err != nil {
				return nil, 0, err
			}
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		session, chat, err = scanIDs(line)
		if err != nil {
			var pe *Error
			if errors.As(err, &pe) {
				pe.File, pe.Line = r.file, r.line
				return nil, 0, pe
			}
			return nil, 0, &Error{File: r.file, Line: r.line, Msg: err.Error()}
		}
		return session, chat, nil
	}
}

// scanIDs is decodeRequest's walk of a line keeping only session_id and
// chat_id (the last of each, as decodeRequest keeps).
func scanIDs(line []byte) (session []byte, chat int64, err error) {
	d := decoder{b: line}
	hasChat := false
	d.ws()
	if !d.eat('{') {
		return nil, 0, d.syntax("expected '{' at the start of a request object")
	}
	d.ws()
	if d.eat('}') {
		return nil, 0, missing("chat_id")
	}
	next := 0
	for {
		d.ws()
		var f field
		if k := canonKeys[next]; len(d.b)-d.i >= len(k.quoted) && string(d.b[d.i:d.i+len(k.quoted)]) == k.quoted {
			d.i += len(k.quoted)
			f, next = k.f, next+1
		} else {
			key, err := d.str()
			if err != nil {
				return nil, 0, d.syntax("expected a quoted field name")
			}
			f = fieldOf(key)
			if at := canonAt[f]; at > 0 {
				next = at
			}
		}
		d.ws()
		if !d.eat(':') {
			return nil, 0, d.syntax("expected ':' after field name")
		}
		d.ws()
		switch f {
		case fSession:
			s, null, err := d.strField("session_id")
			if err != nil {
				return nil, 0, err
			}
			if !null { // a null leaves an earlier value, as decodeRequest has it
				session = s
			}
		case fChat:
			v, err := d.intField("chat_id")
			if err != nil {
				return nil, 0, err
			}
			chat, hasChat = v, true
		case fHash:
			if !d.skipFlatArray() {
				if err := d.skip(0); err != nil {
					return nil, 0, err
				}
			}
		default:
			if err := d.skip(0); err != nil {
				return nil, 0, err
			}
		}
		d.ws()
		if d.eat(',') {
			continue
		}
		if d.eat('}') {
			break
		}
		return nil, 0, d.syntax("expected ',' or '}' after a value")
	}
	d.ws()
	if d.i != len(d.b) {
		return nil, 0, d.syntax("unexpected data after the request object")
	}
	if !hasChat {
		return nil, 0, missing("chat_id")
	}
	return session, chat, nil
}

// skipFlatArray steps over an array at the read position that holds no
// string, array or object (a hash_ids list), whose end is then its first
// ']'; false, moving nothing, for anything else.
func (d *decoder) skipFlatArray() bool {
	if d.i >= len(d.b) || d.b[d.i] != '[' {
		return false
	}
	rest := d.b[d.i+1:]
	j := bytes.IndexByte(rest, ']')
	if j < 0 {
		return false
	}
	if in := rest[:j]; bytes.IndexByte(in, '"') >= 0 || bytes.IndexByte(in, '[') >= 0 || bytes.IndexByte(in, '{') >= 0 {
		return false
	}
	d.i += j + 2
	return true
}

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
// A line as pdhybrid's writer puts it begins {"session_id":"…","chat_id":N,
// and then NextIDs reads no further than that, when nothing later on the
// line could be another session_id or chat_id key (one Next would read
// last): neither quoted name appears in the rest, nor a backslash, which a
// key spelled with escapes needs. Other lines are walked value by value,
// their JSON structure checked.
//
// It does not check what Next checks beyond that (a missing timestamp, a
// float where an integer goes inside hash_ids, and on a line in the
// writer's form the structure after the chat id): the scan's caller reads
// the file again with Next, whose checks stop the run at such a line, so a
// line that NextIDs passes and Next refuses never reaches the simulation.

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
	if session, chat, ok := scanWritten(line); ok {
		return session, chat, nil
	}
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

// scanWritten reads the two ids of a line that begins as the writer's do,
// {"session_id":"…","chat_id":N, with a session id of plain bytes and N an
// integer of up to 18 digits; ok only when the rest of the line holds
// neither key's quoted name nor a backslash, so that no later key can be
// either of them and the ids are the ones decodeRequest would keep.
func scanWritten(line []byte) (session []byte, chat int64, ok bool) {
	const head, mid = `{"session_id":"`, `","chat_id":`
	if !bytes.HasPrefix(line, []byte(head)) {
		return nil, 0, false
	}
	i := len(head)
	for i < len(line) && strPlain[line[i]] {
		i++
	}
	session = line[len(head):i]
	if !bytes.HasPrefix(line[i:], []byte(mid)) {
		return nil, 0, false
	}
	i += len(mid)
	neg := i < len(line) && line[i] == '-'
	if neg {
		i++
	}
	start := i
	var v int64
	for i < len(line) && i-start < 18 && line[i]-'0' <= 9 {
		v = v*10 + int64(line[i]-'0')
		i++
	}
	n := i - start
	if n == 0 || (line[start] == '0' && n > 1) || i >= len(line) || (line[i] != ',' && line[i] != '}') {
		return nil, 0, false // no digits, a leading zero, a fraction, 19 digits or more, the line's end
	}
	if mayNameAnID(line[i:]) {
		return nil, 0, false
	}
	if neg {
		v = -v
	}
	return session, v, true
}

// mayNameAnID reports whether rest holds a backslash or either key's quoted
// name. Both names end in d", so it looks at each d (a couple a line: in
// parent_chat_id and hash_ids), not at each quote, which every key and
// string value has.
func mayNameAnID(rest []byte) bool {
	if bytes.IndexByte(rest, '\\') >= 0 {
		return true
	}
	for off := 0; ; {
		j := bytes.IndexByte(rest[off:], 'd')
		if j < 0 {
			return false
		}
		end := off + j + 2 // past the d and the quote that may follow it
		if end <= len(rest) && rest[end-1] == '"' {
			if name := rest[:end]; bytes.HasSuffix(name, []byte(`"session_id"`)) || bytes.HasSuffix(name, []byte(`"chat_id"`)) {
				return true
			}
		}
		off += j + 1
	}
}

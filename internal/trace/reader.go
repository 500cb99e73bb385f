package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// Error locates a problem in a trace: file, line, field and what was expected.
type Error struct {
	File  string // path as given by the caller; may be empty
	Line  int    // 1-based line number; 0 when not tied to one line
	Field string // JSON field name; may be empty
	Msg   string // what was wrong and what was expected
}

func (e *Error) Error() string {
	var b bytes.Buffer
	if e.File != "" {
		b.WriteString(e.File)
	} else {
		b.WriteString("<trace>")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %q", e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Reader streams requests from a canonical trace. Memory is bounded by the
// longest line, not by the file.
type Reader struct {
	br        *bufio.Reader
	file      string
	line      int
	header    Header
	hasHeader bool
	pending   []byte // first data line, read while looking for the header
	buf       []byte
}

// readBufferSize is the reader's buffer: a line that fits is read in place,
// a longer one is put together in Reader.buf (readLine), so this bounds no
// line. 64 KiB holds a few hundred Mooncake lines or a few WEKA ones (~10
// KB); at 1 MiB, a simulation's two reads of a trace (the session-end scan,
// the run) each touched 256 fresh pages of buffer, ~500 page faults a run.
const readBufferSize = 64 << 10

// NewReader reads the optional header line at once. If the file has no
// header, defaultBlockSize is used as its block size (0 means "unknown"; the
// caller should then refuse to interpret hash ids).
func NewReader(r io.Reader, file string, defaultBlockSize int) (*Reader, error) {
	rd := &Reader{br: bufio.NewReaderSize(r, readBufferSize), file: file}
	rd.header = Header{Version: FormatVersion, BlockSize: defaultBlockSize}
	for {
		line, err := rd.readLine()
		if err == io.EOF {
			return rd, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if bytes.Contains(line, []byte(`"pdhybrid_trace"`)) {
			var h Header
			if err := json.Unmarshal(line, &h); err != nil {
				return nil, &Error{File: file, Line: rd.line, Msg: "malformed header: " + err.Error()}
			}
			if h.Version != FormatVersion {
				return nil, &Error{File: file, Line: rd.line, Field: "pdhybrid_trace", Msg: fmt.Sprintf("unsupported version %d, expected %d", h.Version, FormatVersion)}
			}
			if h.BlockSize <= 0 {
				return nil, &Error{File: file, Line: rd.line, Field: "block_size", Msg: fmt.Sprintf("got %d, expected a positive token count", h.BlockSize)}
			}
			rd.header, rd.hasHeader = h, true
			return rd, nil
		}
		rd.pending = append([]byte(nil), line...)
		return rd, nil
	}
}

// Header returns the file's header (synthesised from the default block size
// when the file has none).
func (r *Reader) Header() Header { return r.header }

// HasHeader reports whether the file began with a header line.
func (r *Reader) HasHeader() bool { return r.hasHeader }

// NotJSON is the located error of a file without a header whose first
// line is not a JSON object (a binary file, text, a CSV): reading it as a
// trace would fail on its first line anyway, and asking for a block size
// first would send the user after the wrong problem. nil otherwise.
func (r *Reader) NotJSON() error {
	if r.hasHeader || r.pending == nil {
		return nil
	}
	t := bytes.TrimSpace(r.pending)
	if len(t) > 0 && t[0] == '{' {
		return nil
	}
	head := t[:min(len(t), 24)]
	what := "text"
	if !utf8.Valid(head) || bytes.ContainsAny(head, "\x00") {
		what = "binary data"
	}
	return &Error{File: r.file, Line: r.line, Msg: fmt.Sprintf("%s (%q...), not a JSON object: expected a canonical trace, a header line {\"pdhybrid_trace\":1,\"block_size\":N} then one JSON request per line (pdhybrid trace convert writes one from WEKA or Mooncake files)", what, head)}
}

// File is the path the reader was given, for locating errors.
func (r *Reader) File() string { return r.file }

// Line is the number of the line most recently read.
func (r *Reader) Line() int { return r.line }

// Next decodes the next request into req, reusing req's HashIDs storage. It
// returns io.EOF at the end of the file and an *Error for a malformed line;
// after an *Error for a line, Next may be called again to go on with the
// following line (validators use this to report every bad line).
func (r *Reader) Next(req *Request) error {
	for {
		var line []byte
		if r.pending != nil {
			line, r.pending = r.pending, nil
		} else {
			var err error
			line, err = r.readLine()
			if err != nil {
				return err
			}
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := decodeRequest(line, req); err != nil {
			var pe *Error
			if errors.As(err, &pe) {
				pe.File, pe.Line = r.file, r.line
				return pe
			}
			return &Error{File: r.file, Line: r.line, Msg: err.Error()}
		}
		return nil
	}
}

// readLine returns the next line without its newline; the slice is valid
// until the next call. A line that fits the bufio buffer is returned in place
// (no copy); only longer lines are assembled in r.buf.
func (r *Reader) readLine() ([]byte, error) {
	chunk, err := r.br.ReadSlice('\n')
	var line []byte
	switch err {
	case nil:
		line = chunk
	case bufio.ErrBufferFull:
		r.buf = append(r.buf[:0], chunk...)
		for err == bufio.ErrBufferFull {
			chunk, err = r.br.ReadSlice('\n')
			r.buf = append(r.buf, chunk...)
		}
		if err != nil && err != io.EOF {
			return nil, r.readErr(err)
		}
		line = r.buf
	case io.EOF:
		if len(chunk) == 0 {
			return nil, io.EOF
		}
		line = chunk
	default:
		return nil, r.readErr(err)
	}
	r.line++
	n := len(line)
	if n > 0 && line[n-1] == '\n' {
		n--
	}
	if n > 0 && line[n-1] == '\r' {
		n--
	}
	return line[:n], nil
}

// readErr wraps an I/O error. It is deliberately not an *Error: an *Error
// means "this line is bad, the next may be fine", while an I/O error ends the
// file.
func (r *Reader) readErr(err error) error {
	name := r.file
	if name == "" {
		name = "<trace>"
	}
	return fmt.Errorf("%s: read after line %d: %w", name, r.line, err)
}

// ReadAll reads every request. It is meant for tests and small files; tools
// that may see large traces should loop over Next.
func ReadAll(r io.Reader, file string, defaultBlockSize int) (Header, []Request, error) {
	rd, err := NewReader(r, file, defaultBlockSize)
	if err != nil {
		return Header{}, nil, err
	}
	var out []Request
	for {
		var req Request
		err := rd.Next(&req)
		if err == io.EOF {
			return rd.Header(), out, nil
		}
		if err != nil {
			return rd.Header(), out, err
		}
		out = append(out, req)
	}
}

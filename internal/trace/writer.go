package trace

import (
	"bufio"
	"io"
	"strconv"
)

// Writer writes a canonical trace: the header line, then one request per line.
// Output is byte-stable for equal input so that converted files can be diffed.
type Writer struct {
	bw  *bufio.Writer
	buf []byte
}

// NewWriter writes h at once.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	h.Version = FormatVersion
	wr := &Writer{bw: bufio.NewWriterSize(w, 1<<20)}
	b := []byte(`{"pdhybrid_trace":`)
	b = strconv.AppendInt(b, int64(h.Version), 10)
	b = append(b, `,"block_size":`...)
	b = strconv.AppendInt(b, int64(h.BlockSize), 10)
	if h.Source != "" {
		b = append(b, `,"source":`...)
		b = appendJSONString(b, h.Source)
	}
	if h.Note != "" {
		b = append(b, `,"note":`...)
		b = appendJSONString(b, h.Note)
	}
	b = append(b, "}\n"...)
	if _, err := wr.bw.Write(b); err != nil {
		return nil, err
	}
	return wr, nil
}

// Write appends one request.
func (w *Writer) Write(r *Request) error {
	b := w.buf[:0]
	b = append(b, `{"session_id":`...)
	b = appendJSONString(b, r.SessionID)
	if r.ParentSessionID != "" {
		b = append(b, `,"parent_session_id":`...)
		b = appendJSONString(b, r.ParentSessionID)
	}
	b = append(b, `,"chat_id":`...)
	b = strconv.AppendInt(b, r.ChatID, 10)
	b = append(b, `,"parent_chat_id":`...)
	b = strconv.AppendInt(b, r.ParentChatID, 10)
	b = append(b, `,"turn":`...)
	b = strconv.AppendInt(b, int64(r.Turn), 10)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendFloat(b, r.Timestamp, 'g', -1, 64)
	b = append(b, `,"input_length":`...)
	b = strconv.AppendInt(b, int64(r.InputLength), 10)
	b = append(b, `,"output_length":`...)
	b = strconv.AppendInt(b, int64(r.OutputLength), 10)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, r.Type)
	if r.ThinkTimeS != nil {
		b = append(b, `,"think_time_s":`...)
		b = strconv.AppendFloat(b, *r.ThinkTimeS, 'g', -1, 64)
	}
	b = append(b, `,"hash_ids":[`...)
	for i, h := range r.HashIDs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, h, 10)
	}
	b = append(b, "]}\n"...)
	w.buf = b
	_, err := w.bw.Write(b)
	return err
}

// Flush writes any buffered data to the underlying writer.
func (w *Writer) Flush() error { return w.bw.Flush() }

// appendJSONString quotes s as a JSON string. strconv.AppendQuote is not
// enough: Go escapes such as \x00 are not valid JSON.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

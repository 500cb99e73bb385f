package gateway

// HTTP/1.1 chunked transfer coding, decoded incrementally: the direct
// relay (relaydirect.go) reads a worker's answer straight from its socket,
// so it needs the decoder's state in its own hands — where a relay took
// over mid-chunk, how much of the chunk is left — which net/http's
// decoder keeps private.

import (
	"bytes"
	"errors"
	"fmt"
)

type chunkPhase uint8

const (
	chunkSize    chunkPhase = iota // reading a chunk-size line
	chunkData                      // inside a chunk's data
	chunkDataEnd                   // the CRLF after a chunk's data
	chunkTrailer                   // trailer lines after the last chunk
	chunkDone                      // the body's end has been read
)

// maxChunkLine bounds a chunk-size or trailer line: a worker sending a
// longer one is broken (or hostile), not slow.
const maxChunkLine = 4096

// chunkDecoder decodes a chunked body fed to it in pieces of any size.
type chunkDecoder struct {
	phase chunkPhase
	left  int64  // data bytes left in the current chunk
	line  []byte // a framing line read so far (size, CRLF or trailer)
}

// errChunk is a malformed chunked body.
var errChunk = errors.New("malformed chunked body")

// next decodes from the start of raw: it returns at most max bytes of
// data (a sub-slice of raw, not copied) and how many bytes of raw it used.
// Framing is consumed without data (nil, used > 0); all of raw is used
// when it ends inside a framing line. Once the body has ended, done
// reports true and nothing more is used.
func (c *chunkDecoder) next(raw []byte, max int) (data []byte, used int, err error) {
	switch c.phase {
	case chunkData:
		k := int(min(c.left, int64(len(raw)), int64(max)))
		c.left -= int64(k)
		if c.left == 0 {
			c.phase = chunkDataEnd
		}
		return raw[:k], k, nil
	case chunkDone:
		return nil, 0, nil
	}
	i := bytes.IndexByte(raw, '\n')
	if i < 0 {
		if len(c.line)+len(raw) > maxChunkLine {
			return nil, 0, fmt.Errorf("%w: a framing line over %d bytes", errChunk, maxChunkLine)
		}
		c.line = append(c.line, raw...)
		return nil, len(raw), nil
	}
	if len(c.line)+i > maxChunkLine {
		return nil, 0, fmt.Errorf("%w: a framing line over %d bytes", errChunk, maxChunkLine)
	}
	line := raw[:i]
	if len(c.line) > 0 {
		c.line = append(c.line, line...)
		line = c.line
	}
	line = bytes.TrimSuffix(line, []byte("\r"))
	if err := c.endLine(line); err != nil {
		return nil, 0, err
	}
	c.line = c.line[:0]
	return nil, i + 1, nil
}

// endLine acts on one complete framing line (without its line end).
func (c *chunkDecoder) endLine(line []byte) error {
	switch c.phase {
	case chunkSize:
		if j := bytes.IndexByte(line, ';'); j >= 0 {
			line = line[:j] // a chunk extension: ignored, as RFC 9112 allows
		}
		line = bytes.TrimSpace(line)
		n, err := parseHex(line)
		if err != nil {
			return err
		}
		if n == 0 {
			c.phase = chunkTrailer
		} else {
			c.phase, c.left = chunkData, n
		}
	case chunkDataEnd:
		if len(line) != 0 {
			return fmt.Errorf("%w: chunk data not followed by CRLF", errChunk)
		}
		c.phase = chunkSize
	case chunkTrailer:
		if len(line) == 0 {
			c.phase = chunkDone
		}
	}
	return nil
}

// done reports whether the body's last chunk and trailer have been read.
func (c *chunkDecoder) done() bool { return c.phase == chunkDone }

// parseHex reads a chunk size: 1 to 15 hex digits (sizes past 2^60 bytes
// are no worker's).
func parseHex(b []byte) (int64, error) {
	if len(b) == 0 || len(b) > 15 {
		return 0, fmt.Errorf("%w: chunk size %q", errChunk, b)
	}
	var n int64
	for _, c := range b {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, fmt.Errorf("%w: chunk size %q", errChunk, b)
		}
		n = n<<4 | int64(d)
	}
	return n, nil
}

// appendChunk frames b as one chunk onto out (nothing for an empty b: an
// empty chunk would end the body).
func appendChunk(out, b []byte) []byte {
	if len(b) == 0 {
		return out
	}
	out = appendHex(out, len(b))
	out = append(out, '\r', '\n')
	out = append(out, b...)
	return append(out, '\r', '\n')
}

// lastChunk ends a chunked body (no trailer).
var lastChunk = []byte("0\r\n\r\n")

func appendHex(out []byte, n int) []byte {
	const digits = "0123456789abcdef"
	var tmp [16]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = digits[n&15]
		n >>= 4
		if n == 0 {
			break
		}
	}
	return append(out, tmp[i:]...)
}

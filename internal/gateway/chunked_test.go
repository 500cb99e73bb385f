package gateway

import (
	"bytes"
	"errors"
	"testing"
)

// decodeAll feeds raw to a fresh decoder in pieces of n bytes.
func decodeAll(raw []byte, n int) (data []byte, done bool, err error) {
	var c chunkDecoder
	for len(raw) > 0 {
		piece := raw[:min(n, len(raw))]
		raw = raw[len(piece):]
		for len(piece) > 0 {
			d, used, err := c.next(piece, 3)
			if err != nil {
				return data, false, err
			}
			data = append(data, d...)
			piece = piece[used:]
			if c.done() {
				return data, true, nil
			}
			if used == 0 {
				return data, false, errors.New("no progress")
			}
		}
	}
	return data, c.done(), nil
}

// The chunked decoder gives the same data however the body is split:
// every piece size from 1 byte to the whole, sizes in either case, an
// extension, a trailer.
func TestChunkDecoderSplitReads(t *testing.T) {
	body := []byte("5\r\nhello\r\nA;ext=1\r\n, world!!!\r\n1\r\n\n\r\n0\r\nX-Trailer: 1\r\n\r\n")
	for n := 1; n <= len(body); n++ {
		data, done, err := decodeAll(body, n)
		if err != nil || !done || string(data) != "hello, world!!!\n" {
			t.Fatalf("pieces of %d: %q done %v err %v", n, data, done, err)
		}
	}
}

// Malformed framing is an error, never data: a bad size, data not
// followed by CRLF, a framing line past the bound.
func TestChunkDecoderMalformed(t *testing.T) {
	for _, raw := range []string{"zz\r\nabc", "3\r\nabcX\r\n", "\r\n", "1234567890abcdef0\r\n", string(bytes.Repeat([]byte("1"), maxChunkLine+1))} {
		if _, _, err := decodeAll([]byte(raw), len(raw)); !errors.Is(err, errChunk) {
			t.Errorf("%.40q: err %v, want a malformed-body error", raw, err)
		}
	}
}

// appendChunk frames what the decoder reads back.
func TestAppendChunkRoundTrip(t *testing.T) {
	var out []byte
	for _, s := range []string{"a", "", string(bytes.Repeat([]byte("x"), 300))} {
		out = appendChunk(out, []byte(s))
	}
	out = append(out, lastChunk...)
	data, done, err := decodeAll(out, 7)
	if err != nil || !done || len(data) != 301 {
		t.Fatalf("%d bytes, done %v, err %v", len(data), done, err)
	}
}

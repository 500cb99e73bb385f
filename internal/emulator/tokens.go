package emulator

import "strings"

// The emulator has no tokenizer and no model. It needs token ids only to
// name prefix blocks (so its radix cache matches across requests as
// SGLang's does) and to produce output ids that a client can check.
//
//   - Text becomes tokens by a deterministic approximation: every
//     BytesPerToken bytes of UTF-8 (the last piece may be shorter) are one
//     token, whose id is a hash of those bytes modulo VocabSize. Equal text
//     prefixes (cut at a multiple of 4 bytes) give equal token prefixes; the
//     count is about what a BPE tokenizer gives for English and code.
//   - Generated token i of request rid has the id OutputToken(rid, i): the
//     same on every worker, so a test can check any output id.
//   - A token id's text is four lowercase letters (TokenText), so output text
//     is 4 bytes per token, as the input approximation assumes.

// BytesPerToken is how many bytes of text make one token.
const BytesPerToken = 4

// VocabSize bounds token ids (Qwen3's vocabulary).
const VocabSize = 151936

// TextTokens turns text into token ids (see the top of this file).
func TextTokens(text string) []int {
	if text == "" {
		return nil
	}
	out := make([]int, 0, (len(text)+BytesPerToken-1)/BytesPerToken)
	for i := 0; i < len(text); i += BytesPerToken {
		piece := text[i:min(i+BytesPerToken, len(text))]
		h := uint64(fnvOffset)
		for j := 0; j < len(piece); j++ {
			h = (h ^ uint64(piece[j])) * fnvPrime
		}
		out = append(out, int(mix64(h)%VocabSize))
	}
	return out
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// mix64 is splitmix64's finaliser: it spreads the bits of x.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// BlockHashes names a prompt's prefix blocks: one id per blockSize tokens,
// the last block possibly partial, each id a hash of the previous id and
// the block's tokens. So an id identifies its whole prefix, as the trace
// hash ids the engine model was built on do.
func BlockHashes(tokens []int, blockSize int) []uint64 {
	if len(tokens) == 0 || blockSize <= 0 {
		return nil
	}
	out := make([]uint64, 0, (len(tokens)+blockSize-1)/blockSize)
	var prev uint64 = 0x9e3779b97f4a7c15
	for i := 0; i < len(tokens); i += blockSize {
		h := uint64(fnvOffset) ^ prev
		for _, t := range tokens[i:min(i+blockSize, len(tokens))] {
			u := uint32(t)
			for k := 0; k < 4; k++ {
				h = (h ^ uint64(byte(u>>(8*k)))) * fnvPrime
			}
		}
		prev = mix64(h)
		out = append(out, prev)
	}
	return out
}

// OutputToken is the id of generated token i of request rid.
func OutputToken(rid string, i int) int {
	h := uint64(fnvOffset)
	for j := 0; j < len(rid); j++ {
		h = (h ^ uint64(rid[j])) * fnvPrime
	}
	return int(mix64(h^uint64(i)*0x9e3779b97f4a7c15) % VocabSize)
}

// TokenText is a token id's text: four lowercase letters.
func TokenText(id int) string {
	var b [4]byte
	u := uint(id)
	for k := 3; k >= 0; k-- {
		b[k] = byte('a' + u%26)
		u /= 26
	}
	return string(b[:])
}

// outputText is the text of tokens.
func outputText(ids []int) string {
	var sb strings.Builder
	sb.Grow(4 * len(ids))
	for _, id := range ids {
		sb.WriteString(TokenText(id))
	}
	return sb.String()
}

package synth

// wekaCalib holds the distributions measured on the 145 real Claude Code
// sessions in ../shared/traces/weka (kv-cache-tester, block size 64). Every
// table is the type-7 sample quantile of the data at quantileGrid;
// TestSynthWekaCalibration recomputes them from the files and fails if a
// number here drifts from the data. docs/workloads.md explains each one.
type wekaCalib struct {
	// firstContext: first request's input minus the session's
	// tool_tokens+system_tokens. Bimodal: a quarter of the sessions start
	// fresh (a few thousand tokens of user prompt), the rest resume a
	// conversation already 50–700K tokens long.
	firstContext quantiles
	// turns: main-agent requests per session.
	turns quantiles
	// appendTokens: new context per turn (turns 3+) beyond the previous turn's prompt
	// and output, max(0, in[i] − in[i−1] − out[i−1]), over the turns whose
	// input did not drop (tool results, file reads, user text).
	appendTokens quantiles
	// appendTurn2: the same at turn 2 alone, where it is four times larger
	// on average: the first tool results (files read, searches) land there.
	appendTurn2 quantiles
	// output: out tokens per main-agent request.
	output quantiles
	// think: think_time in seconds before turns 2+ (client/tool/user delay).
	think quantiles
	// compactRatio: (in[i] − prefix) / (in[i−1] − prefix) at the 34 turns
	// whose input dropped — context compaction keeps the system/tool prefix
	// and replaces the conversation by a shorter one.
	compactRatio quantiles
	// Sub-agents (7 in the set): requests each, first input beyond their own
	// prefix, and their (much shorter, machine-driven) think times.
	subTurns, subFirstContext, subThink quantiles
	// spearmanFirstTurns: rank correlation between firstContext and turns
	// (sessions that resume a long context are shorter).
	spearmanFirstTurns float64
}

// wekaTables returns the measured calibration. A function rather than a
// package variable so that no caller can mutate the shared defaults.
func wekaTables() *wekaCalib {
	return &wekaCalib{
		firstContext:       quantiles{111, 187, 243, 489, 1591, 2434, 3317, 4260, 5422, 12474, 23906, 35609, 51790, 54514, 62019, 74742, 84392, 96862, 110161, 134524, 218251, 248547, 287560, 384903, 574646, 616568, 684423, 701387},
		turns:              quantiles{3, 3, 3, 4, 5.4, 6.6, 8, 12, 14, 15.8, 19.6, 21, 23, 26.4, 31, 34.8, 44, 48, 54.2, 64.8, 72, 90.4, 96.6, 124.2, 138.4, 145.3, 145.9, 146},
		appendTokens:       quantiles{0, 0, 0, 0, 10, 27, 53, 102, 147, 207, 264, 322, 392, 470, 574, 738, 913, 1132, 1528, 2138, 3322, 4542, 6273, 9153, 16309, 27453, 94969, 411432},
		appendTurn2:        quantiles{0, 0, 0, 0, 22, 42, 109, 195, 269, 422, 606, 889, 1175, 1523, 1950, 2931, 3538, 4773, 7845, 11978, 21406, 30310, 52536, 64032, 80876, 83554, 83791, 83850},
		output:             quantiles{0, 69, 80, 99, 112, 124, 136, 148, 159, 172, 189, 211, 231, 256, 284, 322, 369, 433, 511, 610, 807, 987, 1293, 1891, 2921, 4305, 6506, 11082},
		think:              quantiles{0, 2, 3, 4, 5, 5, 6, 6, 7, 8, 9, 10, 12, 15, 18, 23, 32, 46, 72, 124, 192.7, 281.1, 494.7, 1211.4, 2712.3, 3159.8, 10712.9, 77589},
		compactRatio:       quantiles{0.019, 0.025, 0.03, 0.042, 0.071, 0.121, 0.139, 0.183, 0.201, 0.271, 0.342, 0.386, 0.48, 0.55, 0.608, 0.692, 0.745, 0.75, 0.77, 0.812, 0.833, 0.843, 0.854, 0.889, 0.936, 0.951, 0.964, 0.967},
		subTurns:           quantiles{2, 2.5, 3.1, 4.7, 7.4, 10.1, 11.4, 12, 12.6, 13.1, 13.4, 13.7, 14, 15.2, 16.4, 17.6, 18.8, 20, 21.2, 22.2, 22.8, 23.1, 23.4, 23.7, 23.9, 23.9, 24, 24},
		subFirstContext:    quantiles{502, 502, 502, 503, 503, 504, 506, 509, 512, 519, 536, 552, 568, 1368, 2168, 2967, 3239, 3247, 3255, 3263, 3273, 3278, 3283, 3288, 3291, 3292, 3293, 3293},
		subThink:           quantiles{1, 2, 2, 2, 2, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 5, 5, 6, 7, 8, 13.4, 30.4, 35.2, 45.2, 49, 49.5, 49.9, 50},
		spearmanFirstTurns: -0.414,
	}
}

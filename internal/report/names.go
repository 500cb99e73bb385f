package report

import (
	"path/filepath"
	"strconv"
	"strings"
)

// UniqueNames suffixes repeated run names with #2, #3… so legends and
// table columns tell the runs apart.
func UniqueNames(names []string) []string {
	seen := map[string]int{}
	out := make([]string, len(names))
	for i, n := range names {
		seen[n]++
		out[i] = n
		if k := seen[n]; k > 1 {
			out[i] = n + " #" + strconv.Itoa(k)
		}
	}
	return out
}

// DistinctNames names runs apart: a name that repeats (kvc-v2-1p3d from
// two bench outputs) takes as many of its folder's parents as tell the
// runs apart ("bench-a/kvc-v2-1p3d", "bench-b/kvc-v2-1p3d"); runs from
// one folder given twice fall back to UniqueNames' #2. dirs are the run
// folders, in the same order (nil or "" where unknown).
func DistinctNames(names, dirs []string) []string {
	out := append([]string(nil), names...)
	count := map[string]int{}
	for _, n := range names {
		count[n]++
	}
	parts := func(i int) []string {
		if i >= len(dirs) || dirs[i] == "" {
			return nil
		}
		p := strings.Split(filepath.ToSlash(filepath.Clean(dirs[i])), "/")
		if len(p) > 0 && p[len(p)-1] == names[i] {
			p = p[:len(p)-1]
		}
		return p
	}
	for n, c := range count {
		if c < 2 {
			continue
		}
		var idx []int
		for i := range names {
			if names[i] == n {
				idx = append(idx, i)
			}
		}
		for k := 1; k <= 8; k++ {
			labels, seen, ok := map[int]string{}, map[string]bool{}, true
			for _, i := range idx {
				p := parts(i)
				if len(p) > k {
					p = p[len(p)-k:]
				}
				l := strings.Join(append(p, n), "/")
				if seen[l] {
					ok = false
				}
				seen[l], labels[i] = true, l
			}
			if ok {
				for i, l := range labels {
					out[i] = l
				}
				break
			}
		}
	}
	return UniqueNames(out)
}

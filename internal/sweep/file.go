package sweep

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
)

// Spec is a grid as a person writes it, in a grid file or on the command
// line: every list also takes a single value. A grid file is YAML (JSON is
// YAML too):
//
//	mechanisms: [kvcache-centric, pd-disaggregation, pd-colo]
//	set:
//	  direct-max-uncached-tokens: [2048, 8192, 16384]
//	  migration-reject-threshold: [1, 3]
//	  pd-colo:policy: [sticky]   # only in pd-colo's cells
//	workloads: [seed-swe, groups]
//	traces: [/tmp/weka-p005.jsonl]
//	topologies: [1P3D, 2P6D]
//	base: {time-scale: 2, goodput: "ttft:2000,tpot:100"}
type Spec struct {
	Mechanisms list           `yaml:"mechanisms"`
	Set        map[string]any `yaml:"set"`
	Workloads  list           `yaml:"workloads"`
	Traces     list           `yaml:"traces"`
	Topologies list           `yaml:"topologies"`
	Base       map[string]any `yaml:"base"`
}

// list is a YAML sequence of scalars, or one scalar.
type list []string

func (l *list) UnmarshalYAML(b []byte) error {
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return err
	}
	out, err := scalars(v)
	*l = out
	return err
}

// scalars reads a scalar or a sequence of scalars as strings.
func scalars(v any) ([]string, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case []any:
		var out []string
		for _, e := range x {
			s, err := scalar(e)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	s, err := scalar(v)
	return []string{s}, err
}

func scalar(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int, int64, uint64, int32, uint32, uint:
		return fmt.Sprint(x), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	}
	return "", fmt.Errorf("want a number, a word or a list of them, not %v", v)
}

// LoadSpec reads a grid file; an unknown key is an error naming it.
func LoadSpec(path string) (Spec, error) {
	var s Spec
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	if err := yaml.UnmarshalWithOptions(b, &s, yaml.DisallowUnknownField()); err != nil {
		return s, fmt.Errorf("grid file %s: %v", path, err)
	}
	return s, nil
}

// Grid turns the spec into a grid; the knobs' values are as written.
// defaultMech is the mechanism, defaultTopo the topology when none is given.
func (s Spec) Grid(defaultMech string, defaultTopo Topology) (Grid, error) {
	g := Grid{Mechanisms: s.Mechanisms}
	if len(g.Mechanisms) == 0 {
		g.Mechanisms = []string{defaultMech}
	}
	for _, n := range slices.Sorted(maps.Keys(s.Set)) {
		vs, err := scalars(s.Set[n])
		if err != nil {
			return g, fmt.Errorf("set %s: %v", n, err)
		}
		k := ParseKnobName(n)
		k.Values = vs
		g.Knobs = append(g.Knobs, k)
	}
	for _, w := range s.Workloads {
		g.Workloads = append(g.Workloads, Workload{Name: w})
	}
	for _, t := range s.Traces {
		g.Workloads = append(g.Workloads, TraceWorkload(t))
	}
	for _, t := range s.Topologies {
		tp, err := ParseTopology(t)
		if err != nil {
			return g, err
		}
		g.Topologies = append(g.Topologies, tp)
	}
	if len(g.Topologies) == 0 {
		g.Topologies = []Topology{defaultTopo}
	}
	for _, n := range slices.Sorted(maps.Keys(s.Base)) {
		v, err := scalar(s.Base[n])
		if err != nil {
			return g, fmt.Errorf("base %s: %v", n, err)
		}
		g.Base = append(g.Base, "--"+strings.TrimLeft(n, "-")+"="+v)
	}
	return g, nil
}

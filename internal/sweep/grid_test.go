package sweep

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fakeFit stands in for sim's checks: knob "tau" applies only to "kvc",
// "colo" takes no prefill/decode split, and value "bad" is refused.
func fakeFit(c Cell) (Cell, error) {
	if v, ok := c.Value("tau"); ok && v == "bad" {
		return c, errors.New("--tau bad: not a number")
	}
	if c.Mechanism != "kvc" {
		c = c.Without(map[string]bool{"tau": true})
	}
	if c.Mechanism == "colo" {
		c.Topology = c.Topology.Colocated()
	}
	return c, nil
}

func TestExpand(t *testing.T) {
	t13, t22, t26 := Topology{Prefill: 1, Decode: 3}, Topology{Prefill: 2, Decode: 2}, Topology{Prefill: 2, Decode: 6}
	swe := Workload{Name: "seed-swe"}
	for _, tc := range []struct {
		name string
		g    Grid
		want []string
	}{
		{"one cell", Grid{Mechanisms: []string{"kvc"}, Workloads: []Workload{swe}, Topologies: []Topology{t13}},
			[]string{"kvc_1P3D_seed-swe"}},
		{"knobs in name order, first slowest", Grid{Mechanisms: []string{"kvc"}, Workloads: []Workload{swe}, Topologies: []Topology{t13},
			Knobs: []Knob{{Name: "tau", Values: []string{"2048", "8192"}}, {Name: "reject", Values: []string{"1", "3"}}}},
			[]string{"kvc_1P3D_seed-swe_reject=1_tau=2048", "kvc_1P3D_seed-swe_reject=1_tau=8192",
				"kvc_1P3D_seed-swe_reject=3_tau=2048", "kvc_1P3D_seed-swe_reject=3_tau=8192"}},
		{"a knob that does not apply does not multiply", Grid{Mechanisms: []string{"kvc", "pd"}, Workloads: []Workload{swe}, Topologies: []Topology{t13},
			Knobs: []Knob{{Name: "tau", Values: []string{"2048", "8192", "16384"}}}},
			[]string{"kvc_1P3D_seed-swe_tau=2048", "kvc_1P3D_seed-swe_tau=8192", "kvc_1P3D_seed-swe_tau=16384", "pd_1P3D_seed-swe"}},
		{"colocated gets the GPUs; one GPU count runs once", Grid{Mechanisms: []string{"pd", "colo"}, Workloads: []Workload{swe}, Topologies: []Topology{t13, t22, t26}},
			[]string{"pd_1P3D_seed-swe", "pd_2P2D_seed-swe", "pd_2P6D_seed-swe", "colo_4C_seed-swe", "colo_8C_seed-swe"}},
		{"a scoped knob is swept in its mechanisms' cells only", Grid{Mechanisms: []string{"kvc", "pd"}, Workloads: []Workload{swe}, Topologies: []Topology{t13},
			Knobs: []Knob{{Name: "policy", Values: []string{"sticky", "kv-aware"}, Mechanisms: []string{"pd"}}, {Name: "policy", Values: []string{"default"}, Mechanisms: []string{"kvc"}},
				{Name: "tau", Values: []string{"1", "2"}}}},
			[]string{"kvc_1P3D_seed-swe_policy=default_tau=1", "kvc_1P3D_seed-swe_policy=default_tau=2", "pd_1P3D_seed-swe_policy=sticky", "pd_1P3D_seed-swe_policy=kv-aware"}},
		{"workloads and traces", Grid{Mechanisms: []string{"pd"}, Workloads: []Workload{swe, TraceWorkload("/tmp/x/weka-p005.jsonl")}, Topologies: []Topology{t13}},
			[]string{"pd_1P3D_seed-swe", "pd_1P3D_weka-p005"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cells, err := Expand(tc.g, fakeFit)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range cells {
				got = append(got, c.Name())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("cells\n got %q\nwant %q", got, tc.want)
			}
			// The order knobs are given in does not change the cells.
			g := tc.g
			g.Knobs = append([]Knob(nil), g.Knobs...)
			for i, j := 0, len(g.Knobs)-1; i < j; i, j = i+1, j-1 {
				g.Knobs[i], g.Knobs[j] = g.Knobs[j], g.Knobs[i]
			}
			again, _ := Expand(g, fakeFit)
			if !reflect.DeepEqual(again, cells) {
				t.Fatalf("reversed knobs give other cells: %v", again)
			}
		})
	}
}

func TestExpandErrors(t *testing.T) {
	base := Grid{Mechanisms: []string{"kvc"}, Workloads: []Workload{{Name: "w"}}, Topologies: []Topology{{Prefill: 1, Decode: 1}}}
	for _, tc := range []struct {
		name string
		edit func(*Grid)
		want string
	}{
		{"bad value from fit", func(g *Grid) { g.Knobs = []Knob{{Name: "tau", Values: []string{"1", "bad"}}} }, "--tau bad"},
		{"knob twice", func(g *Grid) {
			g.Knobs = []Knob{{Name: "tau", Values: []string{"1"}}, {Name: "tau", Values: []string{"2"}}}
		}, "given twice"},
		{"value twice", func(g *Grid) { g.Knobs = []Knob{{Name: "tau", Values: []string{"1", "1"}}} }, "value 1 given twice"},
		{"no mechanism", func(g *Grid) { g.Mechanisms = nil }, "at least one"},
		{"scopes overlap", func(g *Grid) {
			g.Knobs = []Knob{{Name: "tau", Values: []string{"1"}}, {Name: "tau", Values: []string{"2"}, Mechanisms: []string{"kvc"}}}
		}, "tau given twice for kvc"},
		{"scope outside the grid", func(g *Grid) { g.Knobs = []Knob{{Name: "tau", Values: []string{"1"}, Mechanisms: []string{"pd"}}} }, "pd is not one of the grid's mechanisms"},
		{"two traces of one name", func(g *Grid) { g.Workloads = []Workload{TraceWorkload("a/t.jsonl"), TraceWorkload("b/t.jsonl")} }, "two workloads named t"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := base
			tc.edit(&g)
			_, err := Expand(g, fakeFit)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one with %q", err, tc.want)
			}
		})
	}
}

func TestCellNames(t *testing.T) {
	c := Cell{Mechanism: "pd", Topology: Topology{Prefill: 1, Decode: 3}, Workload: Workload{Name: "w"}}
	plain := c
	plain.Knobs = []Setting{{"goodput", "ttft:300,tpot:50"}}
	spaced := c
	spaced.Knobs = []Setting{{"goodput", "ttft:300 tpot:50"}}
	slashed := c
	slashed.Knobs = []Setting{{"goodput", "ttft:300/tpot:50"}}
	n1, n2, n3 := plain.Name(), spaced.Name(), slashed.Name()
	if n2 == n3 || n1 == n2 {
		t.Fatalf("distinct cells share a name: %q %q %q", n1, n2, n3)
	}
	for _, n := range []string{n1, n2, n3} {
		if strings.ContainsAny(n, "/ :") || filepath.Base(n) != n {
			t.Errorf("name %q is not a plain folder name", n)
		}
	}
	long := c
	long.Knobs = []Setting{{"x", strings.Repeat("9", 400)}}
	if n := long.Name(); len(n) > 255 {
		t.Errorf("name of %d bytes", len(n))
	}
	if n2 != spaced.Name() {
		t.Error("a name is not a function of the cell")
	}
}

func TestParseTopology(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Topology
		ok   bool
	}{
		{"1P3D", Topology{Prefill: 1, Decode: 3}, true},
		{"2p6d", Topology{Prefill: 2, Decode: 6}, true},
		{"0P3D", Topology{}, false},
		{"4", Topology{}, false},
		{"1P3", Topology{}, false},
		{"1P2000D", Topology{}, false},
	} {
		got, err := ParseTopology(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseTopology(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	if s := (Topology{Prefill: 1, Decode: 3}).Colocated().String(); s != "4C" {
		t.Errorf("1P3D colocated is %s, want 4C", s)
	}
}

func TestLoadSpec(t *testing.T) {
	dir := t.TempDir()
	yml := filepath.Join(dir, "g.yaml")
	os.WriteFile(yml, []byte(`mechanisms: [kvcache-centric, pd-colo]
set:
  direct-max-uncached-tokens: [2048, 8192]
  low-watermark: 0.1
workloads: seed-swe
traces: [/x/weka.jsonl]
topologies: [1P3D]
base: {time-scale: 2}
`), 0o644)
	js := filepath.Join(dir, "g.json")
	os.WriteFile(js, []byte(`{"mechanisms": ["kvcache-centric", "pd-colo"], "set": {"direct-max-uncached-tokens": [2048, 8192], "low-watermark": 0.1},
 "workloads": ["seed-swe"], "traces": "/x/weka.jsonl", "topologies": ["1P3D"], "base": {"time-scale": 2}}`), 0o644)
	want := Grid{Mechanisms: []string{"kvcache-centric", "pd-colo"},
		Knobs:      []Knob{{Name: "direct-max-uncached-tokens", Values: []string{"2048", "8192"}}, {Name: "low-watermark", Values: []string{"0.1"}}},
		Workloads:  []Workload{{Name: "seed-swe"}, {Name: "weka", Trace: "/x/weka.jsonl"}},
		Topologies: []Topology{{Prefill: 1, Decode: 3}}, Base: []string{"--time-scale=2"}}
	for _, p := range []string{yml, js} {
		s, err := LoadSpec(p)
		if err != nil {
			t.Fatal(err)
		}
		g, err := s.Grid("pd-disaggregation", Topology{Prefill: 1, Decode: 3})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", p, g, want)
		}
	}
	os.WriteFile(yml, []byte("mechanism: [pd-colo]\n"), 0o644)
	if _, err := LoadSpec(yml); err == nil || !strings.Contains(err.Error(), "mechanism") {
		t.Errorf("an unknown key: %v, want an error naming it", err)
	}
}

func TestParseKnobName(t *testing.T) {
	for in, want := range map[string]Knob{
		"policy":                           {Name: "policy"},
		"--policy":                         {Name: "policy"},
		"pd-colo:policy":                   {Name: "policy", Mechanisms: []string{"pd-colo"}},
		"pd-colo+pd-disaggregation:policy": {Name: "policy", Mechanisms: []string{"pd-colo", "pd-disaggregation"}},
	} {
		if got := ParseKnobName(in); !reflect.DeepEqual(got, want) || got.Label() != strings.TrimLeft(in, "-") {
			t.Errorf("ParseKnobName(%q) = %+v (label %q), want %+v", in, got, got.Label(), want)
		}
	}
}

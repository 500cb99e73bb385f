// Package helm_test renders the chart in pdhybrid/ with Helm's own Go SDK
// and checks the objects it makes. It is a test-only package: nothing the
// pdhybrid binary builds imports Helm.
package helm_test

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

const release, namespace = "agents", "serving"

// objects is a rendered chart, by kind and name.
type objects struct {
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	configs     map[string]*corev1.ConfigMap
	pdbs        map[string]*policyv1.PodDisruptionBudget
	kinds       []string
}

func render(t *testing.T, overrides map[string]any) objects {
	t.Helper()
	ch, err := loader.Load("pdhybrid")
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(ch, overrides, chartutil.ReleaseOptions{Name: release, Namespace: namespace, IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	o := objects{deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{}, configs: map[string]*corev1.ConfigMap{}, pdbs: map[string]*policyv1.PodDisruptionBudget{}}
	for path, text := range files {
		for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(text, -1) {
			if strings.TrimSpace(doc) == "" || strings.HasSuffix(path, ".tpl") {
				continue
			}
			var head struct{ APIVersion, Kind string }
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s: %v\n%s", path, err, doc)
			}
			if head.Kind == "" {
				continue // a document of comments only
			}
			o.kinds = append(o.kinds, head.APIVersion+"/"+head.Kind)
			// Strict: a field Kubernetes does not know is an error.
			into := map[string]any{
				"Deployment": &appsv1.Deployment{}, "Service": &corev1.Service{},
				"ConfigMap": &corev1.ConfigMap{}, "PodDisruptionBudget": &policyv1.PodDisruptionBudget{},
			}[head.Kind]
			if into == nil {
				t.Fatalf("%s: unexpected kind %s", path, head.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
				t.Fatalf("%s: a %s Kubernetes would not take: %v\n%s", path, head.Kind, err, doc)
			}
			switch v := into.(type) {
			case *appsv1.Deployment:
				o.deployments[v.Name] = v
			case *corev1.Service:
				o.services[v.Name] = v
			case *corev1.ConfigMap:
				o.configs[v.Name] = v
			case *policyv1.PodDisruptionBudget:
				o.pdbs[v.Name] = v
			}
		}
	}
	sort.Strings(o.kinds)
	return o
}

// selects reports whether selector picks labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// serveConfig is the gateway's serve --config file, as flag → value.
func serveConfig(t *testing.T, o objects) map[string]any {
	t.Helper()
	cm := o.configs[release+"-pdhybrid-gateway"]
	if cm == nil {
		t.Fatalf("no gateway ConfigMap among %v", o.kinds)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["serve.yaml"]), &cfg); err != nil {
		t.Fatalf("serve.yaml: %v\n%s", err, cm.Data["serve.yaml"])
	}
	return cfg
}

func num(v any) int {
	switch n := v.(type) {
	case float64:
		return int(n)
	case int64:
		return int(n)
	case int:
		return n
	}
	return -1
}

// containerPort is the port a named container port has.
func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return -1
}

// checkCommon holds for every value set: each Deployment's selector picks
// its own pods, each Service and the PDB select exactly one Deployment's
// pods, every Service's targetPort names a port of those pods, the
// gateway listens where its Service, probes and scrape annotations say,
// and its termination grace covers its drain.
func checkCommon(t *testing.T, o objects, v gatewayValues) {
	t.Helper()
	for name, d := range o.deployments {
		if !selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
			t.Errorf("Deployment %s: selector %v does not pick its pods %v", name, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
		}
	}
	picked := func(sel map[string]string) []string {
		var out []string
		for name, d := range o.deployments {
			if selects(sel, d.Spec.Template.Labels) {
				out = append(out, name)
			}
		}
		return out
	}
	for name, s := range o.services {
		ds := picked(s.Spec.Selector)
		if len(ds) != 1 {
			t.Errorf("Service %s selects the pods of %v, want one Deployment's", name, ds)
			continue
		}
		c := o.deployments[ds[0]].Spec.Template.Spec.Containers[0]
		for _, p := range s.Spec.Ports {
			if containerPort(c, p.TargetPort.String()) < 0 {
				t.Errorf("Service %s port %s: targetPort %s names no port of %s", name, p.Name, p.TargetPort.String(), ds[0])
			}
		}
	}
	for name, p := range o.pdbs {
		if ds := picked(p.Spec.Selector.MatchLabels); len(ds) != 1 || ds[0] != release+"-pdhybrid-gateway" {
			t.Errorf("PodDisruptionBudget %s selects %v, want the gateway", name, ds)
		}
	}
	gw := o.deployments[release+"-pdhybrid-gateway"]
	if gw == nil {
		t.Fatalf("no gateway Deployment among %v", o.kinds)
	}
	if *gw.Spec.Replicas != int32(v.replicas) {
		t.Errorf("gateway replicas %d, want %d", *gw.Spec.Replicas, v.replicas)
	}
	c := gw.Spec.Template.Spec.Containers[0]
	cfg := serveConfig(t, o)
	if !slices.Equal(c.Args, []string{"serve", "--config", "/etc/pdhybrid/serve.yaml"}) || c.VolumeMounts[0].MountPath != "/etc/pdhybrid" {
		t.Errorf("gateway runs %v with %v, want serve --config from the ConfigMap", c.Args, c.VolumeMounts)
	}
	if port := containerPort(c, "http"); int(port) != v.port || num(cfg["port"]) != v.port || cfg["host"] != "0.0.0.0" {
		t.Errorf("gateway: container port %d, serve.yaml host %v port %v; want both %d on 0.0.0.0", port, cfg["host"], cfg["port"], v.port)
	}
	svc := o.services[release+"-pdhybrid-gateway"]
	if svc == nil || svc.Spec.Ports[0].Port != int32(v.servicePort) || svc.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("gateway Service %+v, want port %d to the pods' http", svc, v.servicePort)
	}
	if r, l := c.ReadinessProbe, c.LivenessProbe; r == nil || r.HTTPGet.Path != "/health" || r.HTTPGet.Port.String() != "http" ||
		l == nil || l.HTTPGet.Path != "/livez" || l.HTTPGet.Port.String() != "http" {
		t.Errorf("gateway probes: readiness %+v, liveness %+v; want /health and /livez on http", r, l)
	}
	if a := gw.Spec.Template.Annotations; a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != strconv.Itoa(v.port) || a["prometheus.io/path"] != "/metrics" {
		t.Errorf("gateway scrape annotations %v, want /metrics on %d", a, v.port)
	}
	drain := num(cfg["drain-timeout"])
	if g := gw.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || int(*g) < drain+v.preStop {
		t.Errorf("termination grace %v s for a %d s drain after a %d s preStop sleep", g, drain, v.preStop)
	}
	if hook := c.Lifecycle; (v.preStop > 0) != (hook != nil && hook.PreStop != nil && hook.PreStop.Sleep != nil && int(hook.PreStop.Sleep.Seconds) == v.preStop) {
		t.Errorf("preStop %+v, want a %d s sleep", hook, v.preStop)
	}
}

type gatewayValues struct{ replicas, port, servicePort, preStop int }

// checkDiscovery: each --discover name is the SRV name of a headless
// Service the chart made for that role, on the workers' http port; a
// prefill name carries the bootstrap port the prefill pods expose.
func checkDiscovery(t *testing.T, o objects, roles []string) {
	t.Helper()
	cfg := serveConfig(t, o)
	var names []string
	for _, n := range cfg["discover"].([]any) {
		names = append(names, n.(string))
	}
	if len(names) != len(roles) {
		t.Fatalf("serve.yaml discover %v, want one name per role %v", names, roles)
	}
	for i, role := range roles {
		r, name, _ := strings.Cut(names[i], "=")
		rest, ok := strings.CutPrefix(name, "dns+srv://")
		if r != role || !ok {
			t.Errorf("discover %s: want %s=dns+srv://...", names[i], role)
			continue
		}
		host, boot, _ := strings.Cut(rest, "@")
		svcName := strings.TrimPrefix(strings.TrimSuffix(host, "."+namespace+".svc.cluster.local"), "_http._tcp.")
		svc := o.services[svcName]
		d := o.deployments[svcName]
		if svc == nil || d == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("discover %s: no headless Service and Deployment %s", names[i], svcName)
			continue
		}
		c := d.Spec.Template.Spec.Containers[0]
		if svc.Spec.Ports[0].Name != "http" || svc.Spec.Ports[0].Port != containerPort(c, "http") {
			t.Errorf("Service %s: first port %+v, want http on the workers' port %d", svcName, svc.Spec.Ports[0], containerPort(c, "http"))
		}
		if role == "prefill" && boot != fmt.Sprint(containerPort(c, "bootstrap")) {
			t.Errorf("discover %s: bootstrap port %q, the prefill pods expose %d", names[i], boot, containerPort(c, "bootstrap"))
		}
		args := strings.Join(c.Args, " ")
		want := map[string][]string{
			"prefill": {"--disaggregation-mode prefill", "--disaggregation-bootstrap-port " + boot, "--port " + fmt.Sprint(containerPort(c, "http"))},
			"decode":  {"--disaggregation-mode decode", "--enable-streaming-session"},
			"colo":    {"--enable-streaming-session"},
		}[role]
		for _, w := range want {
			if !strings.Contains(args, w) {
				t.Errorf("%s worker args %q lack %q", role, args, w)
			}
		}
		if role == "colo" && strings.Contains(args, "--disaggregation-mode") {
			t.Errorf("colo worker args %q name a disaggregation mode", args)
		}
	}
}

func TestChartDefaults(t *testing.T) {
	o := render(t, nil)
	want := []string{"apps/v1/Deployment", "apps/v1/Deployment", "apps/v1/Deployment", "policy/v1/PodDisruptionBudget", "v1/ConfigMap", "v1/Service", "v1/Service", "v1/Service"}
	if !slices.Equal(o.kinds, want) {
		t.Fatalf("objects %v, want %v", o.kinds, want)
	}
	checkCommon(t, o, gatewayValues{replicas: 2, port: 8000, servicePort: 8000, preStop: 5})
	checkDiscovery(t, o, []string{"prefill", "decode"})
	if cfg := serveConfig(t, o); cfg["mechanism"] != "kvcache-centric" || cfg["policy"] != "kv-aware" {
		t.Errorf("serve.yaml %v, want KVC with kv-aware", cfg)
	}
	if n := *o.deployments[release+"-pdhybrid-decode"].Spec.Replicas; n != 3 {
		t.Errorf("%d decoders, want 3", n)
	}
	if gw := o.deployments[release+"-pdhybrid-gateway"].Spec.Template.Spec.Containers[0]; len(gw.Env) != 0 {
		t.Errorf("gateway env %v without an admin token Secret", gw.Env)
	}
}

// Colocated workers, another port, more replicas, no PDB, an admin token.
func TestChartColocated(t *testing.T) {
	o := render(t, map[string]any{
		"gateway": map[string]any{"replicas": 4, "port": 9000, "service": map[string]any{"port": 80}, "adminTokenSecret": "pdhybrid-admin",
			"podDisruptionBudget": map[string]any{"enabled": false}, "config": map[string]any{"mechanism": "pd-colo", "policy": "sticky"}},
	})
	want := []string{"apps/v1/Deployment", "apps/v1/Deployment", "v1/ConfigMap", "v1/Service", "v1/Service"}
	if !slices.Equal(o.kinds, want) {
		t.Fatalf("objects %v, want %v", o.kinds, want)
	}
	checkCommon(t, o, gatewayValues{replicas: 4, port: 9000, servicePort: 80, preStop: 5})
	checkDiscovery(t, o, []string{"colo"})
	env := o.deployments[release+"-pdhybrid-gateway"].Spec.Template.Spec.Containers[0].Env
	if len(env) != 1 || env[0].Name != "PDHYBRID_ADMIN_TOKEN" || env[0].ValueFrom.SecretKeyRef.Name != "pdhybrid-admin" {
		t.Errorf("gateway env %+v, want PDHYBRID_ADMIN_TOKEN from Secret pdhybrid-admin", env)
	}
}

// Workers deployed elsewhere, named in the config; no preStop sleep.
func TestChartExternalWorkers(t *testing.T) {
	o := render(t, map[string]any{
		"workers": map[string]any{"enabled": false},
		"gateway": map[string]any{"preStopSleepSeconds": 0, "drainTimeoutSeconds": 120, "config": map[string]any{
			"mechanism": "pd-disaggregation", "prefill": []any{"http://p0.example:30000@8998"}, "decode": []any{"http://d0.example:30000", "http://d1.example:30000"}}},
	})
	want := []string{"apps/v1/Deployment", "policy/v1/PodDisruptionBudget", "v1/ConfigMap", "v1/Service"}
	if !slices.Equal(o.kinds, want) {
		t.Fatalf("objects %v, want %v", o.kinds, want)
	}
	checkCommon(t, o, gatewayValues{replicas: 2, port: 8000, servicePort: 8000, preStop: 0})
	cfg := serveConfig(t, o)
	if _, ok := cfg["discover"]; ok || len(cfg["decode"].([]any)) != 2 || num(cfg["drain-timeout"]) != 120 {
		t.Errorf("serve.yaml %v, want the two decoders named, no discovery, a 120 s drain", cfg)
	}
}

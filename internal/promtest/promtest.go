// Package promtest reads a Prometheus /metrics page in tests, with
// Prometheus' own text parser, so that what the tests check is what a
// scraper would see. Test helpers only: the gateway's, the emulated
// worker's, the replay's and the CLI's live tests share it.
package promtest

import (
	"io"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Parse reads a text exposition; the test fails if it does not parse.
func Parse(t testing.TB, r io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("the metrics do not parse: %v", err)
	}
	return fams
}

// Scrape gets url (a /metrics page) and parses it.
func Scrape(t testing.TB, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", url, resp.Status)
	}
	return Parse(t, resp.Body)
}

// Labels are a series' labels by name.
func Labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// Sample is the family's first series whose labels include want; ok is
// false when there is none.
func Sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (*dto.Metric, bool) {
next:
	for _, m := range fams[name].GetMetric() {
		have := Labels(m)
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m, true
	}
	return nil, false
}

// Value is that series' counter or gauge value, 0 when there is none.
func Value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	m, ok := Sample(fams, name, want)
	switch {
	case !ok:
		return 0
	case m.Counter != nil:
		return m.Counter.GetValue()
	default:
		return m.Gauge.GetValue()
	}
}

package report

// pageTemplate is the report page. It is self-contained on purpose: the
// Content-Security-Policy forbids every fetch (a stray external reference
// becomes a console error the browser test catches), styles and the one
// script are inline, and charts are inline SVG.
//
// The script at the end is the page's self-check: it counts, per chart, the
// data marks the browser actually laid out (non-empty bounding box), writes
// the result into #selfcheck and body[data-check], and logs a console error
// when a chart is empty, so both a person and headless Chromium's
// --dump-dom can see whether every chart has data.
const pageTemplate = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<script>
window.addEventListener('error', function (e) {
  document.documentElement.setAttribute('data-js-error', String(e.message));
});
</script>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px; color: #222; max-width: 1360px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 14px; margin: 18px 0 6px; }
table { border-collapse: collapse; font-size: 12.5px; margin: 8px 0 16px; }
th, td { padding: 3px 8px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th { background: #f6f6f6; font-weight: 600; }
td.l, th.l { text-align: left; }
td.good { color: #0a7a2f; }
td.bad { color: #b3261e; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; vertical-align: -1px; margin-right: 5px; }
.grid { display: flex; flex-wrap: wrap; gap: 18px; }
figure { margin: 0; border: 1px solid #e6e6e6; border-radius: 6px; padding: 8px; background: #fff; }
figcaption { font-size: 12px; max-width: 600px; color: #444; margin-top: 4px; }
figcaption b { color: #222; }
svg.chart text { fill: #333; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
#selfcheck { font-size: 11px; color: #888; margin-top: 24px; }
.muted { color: #777; }
</style>
</head>
<body data-charts="{{len .Charts}}">
<h1>{{.Title}}</h1>
<p class="muted">Deltas compare each run with the first ({{index .Names 0}}): relative change for amounts, percentage points (pp) for shares. Green is better, red worse. Only completed requests enter latency figures; failures are counted by cause.</p>

<h2>Runs</h2>
<table>
<tr><th class="l">run</th><th class="l">mechanism</th><th class="l">policy</th><th>requests</th><th>completed</th><th class="l">directory</th></tr>
{{range .Runs}}<tr><td class="l"><span class="swatch" style="background: {{.Color}}"></span>{{.Name}}</td><td class="l">{{.Mechanism}}</td><td class="l">{{.Policy}}</td><td>{{.Requests}}</td><td>{{.Completed}}</td><td class="l muted">{{.Dir}}</td></tr>
{{end}}</table>

<h2>Headline</h2>
<table id="headline">
<tr><th class="l">metric</th><th class="l">unit</th>{{range $i, $n := .Names}}<th>{{$n}}</th>{{if $i}}<th>Δ</th>{{end}}{{end}}</tr>
{{range .Headline}}<tr><td class="l">{{.Label}}</td><td class="l muted">{{.Unit}}</td>{{range $i, $c := .Cells}}<td>{{$c.Value}}</td>{{if $i}}<td class="{{$c.Class}}">{{$c.Delta}}</td>{{end}}{{end}}</tr>
{{end}}</table>

<h3>Failures by cause</h3>
{{if .Failures}}<table>
<tr><th class="l">cause</th>{{range .Names}}<th>{{.}}</th>{{end}}</tr>
{{range .Failures}}<tr><td class="l">{{.Name}}</td>{{range .Counts}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{else}}<p class="muted">No failures in any run.</p>{{end}}

<h2>Charts</h2>
<div class="grid">
{{range .Charts}}<figure id="{{.ID}}">
{{.SVG}}
<figcaption><b>{{.Question}}</b><br>{{.Method}}</figcaption>
</figure>
{{end}}</div>

<h2>Per execution mode</h2>
{{range .Modes}}<h3><span class="swatch" style="background: {{.Color}}"></span>{{.Run}}</h3>
<table>
<tr><th class="l">execution mode</th><th>requests</th><th>completed</th><th>TTFT mean (s)</th><th>p50</th><th>p90</th><th>p99</th><th>e2e mean (s)</th><th>e2e p99</th></tr>
{{range .Rows}}<tr><td class="l">{{.Mode}}</td><td>{{.Requests}}</td><td>{{.Completed}}</td><td>{{num .TTFT.Mean}}</td><td>{{num .TTFT.P50}}</td><td>{{num .TTFT.P90}}</td><td>{{num .TTFT.P99}}</td><td>{{num .Latency.Mean}}</td><td>{{num .Latency.P99}}</td></tr>
{{end}}</table>
{{end}}

<h2>TTFT tail attribution (TTFT ≥ each run's p{{.TailQ}})</h2>
{{range .Tails}}<h3><span class="swatch" style="background: {{.Color}}"></span>{{.Run}}: {{.Tail}} requests with TTFT ≥ {{num .Threshold}} s</h3>
<table>
<tr><th class="l">execution mode</th><th>requests in tail</th><th>share of tail</th><th>mean TTFT in tail (s)</th></tr>
{{$n := .Tail}}{{range .Rows}}<tr><td class="l">{{.Mode}}</td><td>{{.Count}}</td><td>{{pct .Count $n}}</td><td>{{num .MeanTTFTS}}</td></tr>
{{end}}</table>
{{end}}

{{if .Events}}<h2>Structural events</h2>
<table>
<tr><th class="l">event kind</th>{{range .Names}}<th>{{.}}</th>{{end}}</tr>
{{range .Events}}<tr><td class="l">{{.Name}}</td>{{range .Counts}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{end}}

<p id="selfcheck">self-check did not run</p>
<script>
(function () {
  var charts = document.querySelectorAll('svg.chart');
  var empty = [];
  for (var i = 0; i < charts.length; i++) {
    var svg = charts[i], marks = svg.querySelectorAll('.mark'), drawn = 0;
    for (var j = 0; j < marks.length; j++) {
      var b = marks[j].getBBox();
      if (isFinite(b.width) && isFinite(b.height) && b.width + b.height > 0) drawn++;
    }
    svg.setAttribute('data-drawn', String(drawn));
    if (drawn === 0) empty.push(svg.parentNode.id || ('chart ' + i));
  }
  var ok = charts.length > 0 && empty.length === 0;
  document.getElementById('selfcheck').textContent = 'self-check: ' + charts.length + ' charts, ' +
    (ok ? 'all with data' : empty.length + ' without data: ' + empty.join(', '));
  document.body.setAttribute('data-check', ok ? 'ok' : 'fail');
  if (!ok) console.error('pdhybrid report: charts without data: ' + empty.join(', '));
})();
</script>
</body>
</html>
`

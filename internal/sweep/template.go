package sweep

// pageHTML is the sweep page. The script at the end checks the page as the
// browser laid it out — every chart drew data marks, the page is no wider
// than the window — and records the verdict in body[data-check] ("ok" or
// "fail") with body[data-check-detail], logging a console error on
// failure; it shows nothing to the reader.
const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px; color: #222; max-width: 1360px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
ul.axes { font-size: 13px; color: #444; }
table { border-collapse: collapse; font-size: 12px; margin: 8px 0 16px; }
th, td { padding: 3px 7px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th { background: #f6f6f6; font-weight: 600; vertical-align: bottom; }
td.l, th.l { text-align: left; }
tr.front td { font-weight: 600; background: #f3f8ff; }
td.bad { color: #b3261e; }
.wide { overflow-x: auto; max-width: 100%; }
.grid { display: flex; flex-wrap: wrap; gap: 18px; }
figure { margin: 0; border: 1px solid #e6e6e6; border-radius: 6px; padding: 8px; background: #fff; max-width: 100%; box-sizing: border-box; }
svg.chart { max-width: 100%; height: auto; }
svg.chart text { fill: #333; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
figcaption { font-size: 12px; max-width: 600px; color: #444; margin-top: 4px; word-break: break-word; }
.muted { color: #777; }
</style>
</head>
<body data-charts="{{.Charts}}">
<h1>{{.Title}}</h1>
<ul class="axes">{{range .Axes}}<li>{{.}}</li>{{end}}</ul>
{{if .Failed}}<p class="muted">Cells that did not finish (not in the table): {{range $k, $v := .Failed}}{{$k}} ({{$v}}); {{end}}</p>{{end}}
{{if .Floors}}<h2>Latency floor of each workload</h2>
<p class="muted">Every request alone on an idle GPU with an ideal prefix cache (<code>pdhybrid floor</code>): no cell of the workload is below it at any percentile.</p>
<div class="wide"><table class="floors">
<tr><th class="l">workload</th><th>requests</th><th>uncached</th><th>TTFT mean</th><th>p50</th><th>p90</th><th>p99</th><th>E2E mean</th><th>p50</th><th>p90</th><th>p99</th></tr>
{{range .Floors}}<tr><td class="l">{{.Workload}}</td><td>{{.Requests}}</td><td>{{num .Uncached}}</td><td>{{num .TTFTMean}}</td><td>{{num .TTFTP50}}</td><td>{{num .TTFTP90}}</td><td>{{num .TTFTP99}}</td><td>{{num .E2EMean}}</td><td>{{num .E2EP50}}</td><td>{{num .E2EP90}}</td><td>{{num .E2EP99}}</td></tr>
{{end}}</table></div>{{end}}
<h2>Pareto front of TTFT p50 against p99</h2>
<div class="grid">{{range .Fronts}}{{template "figure" .}}{{end}}</div>
{{range .Knobs}}<h2>Against {{.Name}}</h2>
{{if .Note}}<p class="muted">{{.Name}} {{.Note}}.</p>{{end}}
<div class="grid">{{range .Figures}}{{template "figure" .}}{{end}}</div>
{{end}}
<h2>Cells</h2>
<p class="muted">One row per cell (its run folder); bold rows are on the Pareto front of their workload and GPU count. Latencies in milliseconds.</p>
<div class="wide"><table id="cells">
<tr><th class="l">cell</th><th class="l">mechanism</th><th class="l">policy</th><th class="l">workload</th><th class="l">topology</th>{{range .KnobCols}}<th>{{.}}</th>{{end}}<th>requests</th><th>failures</th><th>TTFT mean</th><th>p50</th><th>p90</th><th>p99</th><th>E2E mean</th><th>p50</th><th>p90</th><th>p99</th><th>TPOT p99</th><th>direct share</th><th>goodput</th></tr>
{{range $r := .Rows}}<tr{{if .Pareto}} class="front"{{end}}><td class="l">{{.Cell}}</td><td class="l">{{.Mechanism}}</td><td class="l">{{.Policy}}</td><td class="l">{{.Workload}}</td><td class="l">{{.Topology}}</td>{{range $.KnobCols}}<td>{{index $r.Knobs .}}</td>{{end}}<td{{if not .Complete}} class="bad" title="{{.StopReason}}"{{end}}>{{.Requests}}{{if not .Complete}} (stopped){{end}}</td><td{{if .Failures}} class="bad"{{end}}>{{.Failures}}</td><td>{{num .TTFTMeanMs}}</td><td>{{num .TTFTP50Ms}}</td><td>{{num .TTFTP90Ms}}</td><td>{{num .TTFTP99Ms}}</td><td>{{num .E2EMeanMs}}</td><td>{{num .E2EP50Ms}}</td><td>{{num .E2EP90Ms}}</td><td>{{num .E2EP99Ms}}</td><td>{{num .TPOTP99Ms}}</td><td>{{num .DirectShare}}</td><td>{{num .Goodput}}</td></tr>
{{end}}</table></div>
<script>
(function () {
  var problems = [];
  var svgs = document.querySelectorAll('svg.chart'), shown = 0;
  for (var i = 0; i < svgs.length; i++) {
    var fig = svgs[i].closest('figure'), id = fig ? fig.id : 'chart ' + i;
    if (svgs[i].querySelectorAll('.mark').length === 0) { problems.push(id + ': no data drawn'); continue; }
    var r = svgs[i].getBoundingClientRect();
    if (r.width < 50 || r.height < 50) { problems.push(id + ': drawn ' + r.width + 'x' + r.height + ' px'); continue; }
    shown++;
  }
  if (svgs.length !== +document.body.getAttribute('data-charts')) problems.push(svgs.length + ' charts on the page, ' + document.body.getAttribute('data-charts') + ' made');
  document.body.setAttribute('data-drawn-charts', String(shown));
  var doc = document.documentElement;
  if (doc.scrollWidth > doc.clientWidth + 1) problems.push('page is ' + doc.scrollWidth + ' px wide in a ' + doc.clientWidth + ' px window');
  var ok = shown > 0 && problems.length === 0;
  document.body.setAttribute('data-check', ok ? 'ok' : 'fail');
  document.body.setAttribute('data-check-detail', problems.join('; '));
  if (!ok) console.error('pdhybrid sweep page check: ' + problems.join('; '));
})();
</script>
</body>
</html>
{{define "figure"}}<figure id="{{.ID}}">
{{.SVG}}
{{if .Caption}}<figcaption>{{.Caption}}</figcaption>{{end}}
</figure>{{end}}`

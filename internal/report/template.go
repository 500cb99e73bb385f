package report

// pageTemplate is the report page. It is self-contained on purpose: the
// Content-Security-Policy forbids every fetch (a stray external reference
// becomes a console error the browser test catches), styles and the one
// script are inline, and charts are inline SVG.
//
// The script at the end checks the page as the browser laid it out and
// records the verdict in body[data-check] ("ok" or "fail") and
// body[data-check-detail], logging a console error on failure; it shows
// nothing to the reader. It checks that every chart drew data marks, that
// each curve's drawn area matches the share its caption states, that the
// page is no wider than the window and that the facts come first.
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
.wide { overflow-x: auto; max-width: 100%; }
td.dir { white-space: normal; word-break: break-all; min-width: 12em; }
#mode-legend td.words { white-space: normal; min-width: 16em; }
#mode-legend td code { white-space: normal; word-break: break-all; }
table.facts th { text-align: left; background: none; color: #555; font-weight: 600; vertical-align: top; }
table.facts td { text-align: left; white-space: normal; }
table.facts .fv { display: inline-block; margin-right: 14px; }
.warn { background: #fdecea; color: #8a1c13; border: 1px solid #f2b8b5; border-radius: 4px; padding: 6px 10px; }
td.incomplete { color: #b3261e; font-weight: 600; white-space: normal; }
details.folded { font-size: 13px; margin: 6px 0; }
details.folded summary { cursor: pointer; color: #444; }
.claims { display: block; margin-top: 3px; }
.claims .claim { display: inline-block; margin-right: 12px; }
th { background: #f6f6f6; font-weight: 600; white-space: normal; overflow-wrap: break-word; vertical-align: bottom; }
#headline th { max-width: 9em; }
td.l, th.l { text-align: left; }
td.good { color: #0a7a2f; }
td.bad { color: #b3261e; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; vertical-align: -1px; margin-right: 5px; }
.grid { display: flex; flex-wrap: wrap; gap: 18px; }
figure { margin: 0; border: 1px solid #e6e6e6; border-radius: 6px; padding: 8px; background: #fff; max-width: 100%; box-sizing: border-box; }
svg.chart { max-width: 100%; height: auto; }
figcaption { font-size: 12px; max-width: 600px; color: #444; margin-top: 4px; }
figcaption b { color: #222; }
svg.chart text { fill: #333; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
.muted { color: #777; }
td.words { white-space: normal; min-width: 24em; max-width: 48em; }
.verdict { font-size: 13.5px; background: #f6f8fa; border: 1px solid #e1e4e8; border-radius: 6px; padding: 8px 12px; margin: 10px 0; }
.verdict ul { margin: 4px 0; padding-left: 20px; }
.verdict ul.kvc li { font-weight: 600; }
</style>
</head>
<body data-charts="{{len .Charts}}" data-folded="{{len .Folded}}">
<h1>{{.Title}}</h1>
{{range .Incomplete}}<p class="warn" data-incomplete="{{.Name}}"><b>{{.Name}}</b> is incomplete: {{.StopReason}}. Its figures cover only what finished before it stopped.</p>
{{end}}<div id="verdict" class="verdict"><b>Verdict</b> <span class="muted">(each run against the best; × = its value / the best's: above 1 is worse for latency and failures, below 1 worse for goodput)</span>
{{if .VerdictKVC}}<ul class="kvc">{{range .VerdictKVC}}<li>{{.}}</li>{{end}}</ul>{{end}}
<ul>{{range .VerdictStats}}<li>{{.}}</li>{{end}}</ul></div>
<table id="facts" class="facts">
{{range .Facts}}<tr data-fact="{{.Key}}"><th>{{.Label}}</th>{{if .Same}}<td data-same="true">{{or .Value "—"}}</td>{{else}}<td data-same="false">{{range .PerRun}}<span class="fv" data-run="{{.Name}}"><span class="swatch" style="background: {{.Color}}"></span>{{.Name}}: <b>{{or .Value "—"}}</b></span>{{end}}</td>{{end}}</tr>
{{end}}</table>
<p class="muted">Report written by pdhybrid {{.Version}}. Deltas compare each run with the first ({{index .Names 0}}): relative change for amounts, percentage points (pp) for shares. Green is better, red worse. Only completed requests enter latency figures; failures are counted by cause.</p>

<h2>Runs</h2>
<div class="wide"><table id="runs">
<tr><th class="l">run</th><th class="l">mechanism</th><th class="l">policy</th><th class="l">GPUs</th><th>requests</th><th>completed</th><th class="l">status</th><th class="l">directory</th></tr>
{{range .Runs}}<tr><td class="l"><span class="swatch" style="background: {{.Color}}"></span>{{.Name}}</td><td class="l">{{.Mechanism}}</td><td class="l">{{.Policy}}</td><td class="l">{{or .GPUs "—"}}</td><td>{{.Requests}}</td><td>{{.Completed}}</td>{{if .Incomplete}}<td class="l incomplete">incomplete: {{.StopReason}}</td>{{else}}<td class="l">complete</td>{{end}}<td class="l muted dir">{{.Dir}}</td></tr>
{{end}}</table></div>

<h2>Headline</h2>
<div class="wide"><table id="headline">
<tr><th class="l">metric</th><th class="l">unit</th>{{range $i, $n := .Names}}<th>{{$n}}</th>{{if $i}}<th>Δ</th>{{end}}{{end}}</tr>
{{range .Headline}}<tr><td class="l">{{.Label}}</td><td class="l muted">{{.Unit}}</td>{{range $i, $c := .Cells}}<td>{{$c.Value}}</td>{{if $i}}<td class="{{$c.Class}}">{{$c.Delta}}</td>{{end}}{{end}}</tr>
{{end}}</table></div>

<h3>Failures by cause</h3>
{{if .Failures}}<div class="wide"><table>
<tr><th class="l">cause</th>{{range .Names}}<th>{{.}}</th>{{end}}</tr>
{{range .Failures}}<tr><td class="l">{{.Name}}</td>{{range .Counts}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table></div>{{else}}<p class="muted">No failures in any run.</p>{{end}}

{{if .ModeLegend}}<h3>Execution modes in plain words</h3>
<p class="muted">Every request is labelled with how it was served; the labels in the charts and tables below mean:</p>
<div class="wide"><table id="mode-legend">
<tr><th class="l">label</th><th class="l">what happened</th>{{range .Names}}<th>{{.}}</th>{{end}}</tr>
{{range .ModeLegend}}<tr><td class="l"><code>{{.Mode}}</code></td><td class="l words">{{.Words}}</td>{{range .Counts}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table></div>{{end}}

<h2>Charts</h2>
<div class="grid">
{{range .Charts}}{{template "figure" .}}
{{end}}</div>
{{range .Folded}}<details class="folded" id="{{.ID}}-folded"><summary><b>{{.Title}}</b> folded away: {{.FoldNote}}</summary>
{{template "figure" .}}
</details>
{{end}}

<h2>Per execution mode</h2>
{{if .OneModeEach}}<details class="folded" id="modes-folded"><summary>Folded away: every run took one execution mode, so these tables repeat the headline.</summary>
{{end}}{{range .Modes}}<h3><span class="swatch" style="background: {{.Color}}"></span>{{.Run}}</h3>
<div class="wide"><table>
<tr><th class="l">execution mode</th><th>requests</th><th>completed</th><th>TTFT mean (s)</th><th>p50</th><th>p90</th><th>p99</th><th>e2e mean (s)</th><th>e2e p99</th></tr>
{{range .Rows}}<tr><td class="l">{{.Mode}}</td><td>{{.Requests}}</td><td>{{.Completed}}</td><td>{{num .TTFT.Mean}}</td><td>{{num .TTFT.P50}}</td><td>{{num .TTFT.P90}}</td><td>{{num .TTFT.P99}}</td><td>{{num .Latency.Mean}}</td><td>{{num .Latency.P99}}</td></tr>
{{end}}</table></div>
{{end}}{{if .OneModeEach}}</details>{{end}}

<h2>TTFT tail attribution (TTFT ≥ each run's p{{.TailQ}})</h2>
{{if .OneModeEach}}<details class="folded" id="tails-folded"><summary>Folded away: every run took one execution mode, so its whole tail is that mode.</summary>
{{end}}{{range .Tails}}<h3><span class="swatch" style="background: {{.Color}}"></span>{{.Run}}: {{.Tail}} requests with TTFT ≥ {{num .Threshold}} s</h3>
<table>
<tr><th class="l">execution mode</th><th>requests in tail</th><th>share of tail</th><th>mean TTFT in tail (s)</th></tr>
{{$n := .Tail}}{{range .Rows}}<tr><td class="l">{{.Mode}}</td><td>{{.Count}}</td><td>{{pct .Count $n}}</td><td>{{num .MeanTTFTS}}</td></tr>
{{end}}</table>
{{end}}{{if .OneModeEach}}</details>{{end}}

{{if .Events}}<h2>Structural events</h2>
<div class="wide"><table>
<tr><th class="l">event kind</th>{{range .Names}}<th>{{.}}</th>{{end}}</tr>
{{range .Events}}<tr><td class="l">{{.Name}}</td>{{range .Counts}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table></div>{{end}}

<script>
(function () {
  var problems = [];
  function visible(el) {
    for (var p = el; p; p = p.parentElement) {
      if (p.tagName === 'DETAILS' && !p.open) return false;
    }
    return true;
  }
  function nums(s) { return s.trim().split(/\s+/).map(Number); }
  var charts = document.querySelectorAll('svg.chart'), shown = 0;
  for (var i = 0; i < charts.length; i++) {
    var svg = charts[i], fig = svg.closest('figure'), id = fig ? fig.id : 'chart ' + i;
    if (!visible(svg)) continue;
    shown++;
    var marks = svg.querySelectorAll('.mark'), drawn = 0;
    for (var j = 0; j < marks.length; j++) {
      var b = marks[j].getBBox();
      if (isFinite(b.width) && isFinite(b.height) && b.width + b.height > 0) drawn++;
    }
    svg.setAttribute('data-drawn', String(drawn));
    if (drawn === 0) problems.push(id + ': no data drawn');
    // Each curve's drawn area against the share its caption states.
    var claims = fig ? fig.querySelectorAll('.area-claim') : [];
    if (claims.length === 0) continue;
    var fr = nums(svg.getAttribute('data-frame')), xd = svg.getAttribute('data-x').split(' '),
        yd = svg.getAttribute('data-y').split(' ');
    var x0 = +xd[0], x1 = +xd[1], y0 = +yd[0], y1 = +yd[1];
    var lines = svg.querySelectorAll('polyline[data-line]');
    for (var c = 0; c < claims.length; c++) {
      var name = claims[c].getAttribute('data-line'), area = 0;
      for (var k = 0; k < lines.length; k++) {
        if (lines[k].getAttribute('data-line') !== name) continue;
        var pts = lines[k].points, px = null, py = null;
        for (var q = 0; q < pts.numberOfItems; q++) {
          var pt = pts.getItem(q);
          if (pt.x < fr[0] - 0.5 || pt.x > fr[2] + 0.5 || pt.y < fr[1] - 0.5 || pt.y > fr[3] + 0.5) {
            problems.push(id + ': ' + name + ' draws outside its frame');
          }
          var x = x0 + (pt.x - fr[0]) / (fr[2] - fr[0]) * (x1 - x0);
          var y = y0 + (fr[3] - pt.y) / (fr[3] - fr[1]) * (y1 - y0);
          if (px !== null) area += (x - px) * (y + py) / 2;
          px = x; py = y;
        }
      }
      var claimed = parseFloat(claims[c].textContent) / 100;
      claims[c].setAttribute('data-drawn-area', area.toFixed(4));
      if (!(Math.abs(area - claimed) <= 0.005)) {
        problems.push(id + ': ' + name + ' encloses ' + (100 * area).toFixed(1) + '% but the caption says ' + claims[c].textContent);
      }
    }
  }
  document.body.setAttribute('data-drawn-charts', String(shown));
  var doc = document.documentElement;
  if (doc.scrollWidth > doc.clientWidth + 1) {
    problems.push('page is ' + doc.scrollWidth + ' px wide in a ' + doc.clientWidth + ' px window');
  }
  // Tables wider than their column scroll inside it; which ones do is
  // recorded (not a failure: a narrow window may need it).
  var wide = document.querySelectorAll('.wide'), scrolled = [];
  for (var w = 0; w < wide.length; w++) {
    if (wide[w].scrollWidth > wide[w].clientWidth + 1) {
      var t = wide[w].querySelector('table');
      scrolled.push((t && t.id) || 'table ' + w);
    }
  }
  document.body.setAttribute('data-scrolled-tables', scrolled.join(' '));
  var facts = document.getElementById('facts'), head = document.getElementById('headline');
  if (!facts || !head || facts.getBoundingClientRect().top > head.getBoundingClientRect().top) {
    problems.push('the run facts are not above the headline');
  }
  var ok = shown > 0 && problems.length === 0;
  document.body.setAttribute('data-check', ok ? 'ok' : 'fail');
  document.body.setAttribute('data-check-detail', problems.join('; '));
  if (!ok) console.error('pdhybrid report check: ' + problems.join('; '));
})();
</script>
</body>
</html>
{{define "figure"}}<figure id="{{.ID}}">
{{.SVG}}
<figcaption><b>{{.Question}}</b><br>{{.Method}}{{if .Claims}}<span class="claims">{{.ClaimLead}} {{range .Claims}}<span class="claim"><span class="swatch" style="background: {{.Color}}"></span>{{.Run}}: {{.In}} of {{.Total}} (<span class="area-claim" data-line="{{.Run}}">{{.Percent}}</span>)</span>{{end}}</span>{{end}}</figcaption>
</figure>{{end}}
`

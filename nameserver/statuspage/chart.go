package statuspage

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"
)

// A chart is an inline SVG of rates over the sampled window, drawn on
// the server: the page needs no script to show it.
type chart struct {
	Title string
	SVG   template.HTML
}

// series is one line of a chart.
type series struct {
	name  string
	color string
	// dash is the line's stroke-dasharray ("" for a solid line), so that
	// lines over one another stay apart.
	dash  string
	value func(Rate) float64
}

// axis is a chart's y axis: how its values read, and the least top it
// has (so that an idle chart reads 0 to 1/s, or 0 to 1 KiB/s).
type axis struct {
	format func(float64) string
	round  func(float64) float64
	least  float64
}

var (
	perSecondAxis      = axis{perSecond, roundUp, 1}
	bytesPerSecondAxis = axis{bytesPerSecond, roundUpBytes, 1024}
)

// Chart geometry, in SVG user units.
const (
	chartW, chartH = 560, 170
	plotL, plotR   = 64, 8 // margins for the y labels and the right edge
	plotT, plotB   = 10, 22
)

// charts draws the page's charts over the window ending at the newest
// rate.
func (p *Page) charts() []chart {
	rs := rates(p.samples.all())
	window := p.cfg.SampleInterval * time.Duration(p.cfg.Samples)
	return []chart{
		{Title: "Lock grants and refusals per second", SVG: drawChart(rs, window, perSecondAxis, []series{
			{"grants", "#2a7ab0", "", func(r Rate) float64 { return r.GrantsPerSecond }},
			{"refusals", "#c0392b", "5 3", func(r Rate) float64 { return r.RefusalsPerSecond }},
		})},
		{Title: "Repair copies, bytes per second", SVG: drawChart(rs, window, bytesPerSecondAxis, []series{
			{"repair", "#27856a", "", func(r Rate) float64 { return r.RepairBytesPerSecond }},
		})},
	}
}

// drawChart draws the series of rs over window, the y axis from 0 to a
// round maximum.
func drawChart(rs []Rate, window time.Duration, y axis, ss []series) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img">`, chartW, chartH, chartW, chartH)
	pw, ph := float64(chartW-plotL-plotR), float64(chartH-plotT-plotB)
	if len(rs) == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="empty">collecting samples…</text></svg>`, plotL, chartH/2)
		return template.HTML(b.String()) // numbers and constants only
	}
	top := y.least
	for _, r := range rs {
		for _, s := range ss {
			top = max(top, s.value(r))
		}
	}
	top = y.round(top)
	end := rs[len(rs)-1].Time
	start := end.Add(-window)
	for i := range 3 { // grid lines and labels at 0, top/2 and top
		v := top * float64(i) / 2
		at := plotT + ph*(1-v/top)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="grid"/>`, plotL, at, chartW-plotR, at)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="axis" text-anchor="end">%s</text>`, plotL-4, at+4, template.HTMLEscapeString(y.format(v)))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" class="axis">-%s</text>`, plotL, chartH-6, shortDuration(window))
	fmt.Fprintf(&b, `<text x="%d" y="%d" class="axis" text-anchor="end">now</text>`, chartW-plotR, chartH-6)
	for i, s := range ss {
		var pts []string
		for _, r := range rs {
			x := plotL + pw*r.Time.Sub(start).Seconds()/window.Seconds()
			if x < plotL {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, plotT+ph*(1-s.value(r)/top)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" stroke-dasharray="%s" points="%s"/>`,
			s.color, s.dash, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s" class="legend">%s %s</text>`, plotL+8+110*i, plotT+12, s.color,
			s.name, template.HTMLEscapeString(y.format(s.value(rs[len(rs)-1]))))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// roundUp is the smallest of 1, 2 or 5 times a power of ten at or above
// v > 0.
func roundUp(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// roundUpBytes is roundUp in the binary unit (KiB, MiB, ...) of v >= 1.
func roundUpBytes(v float64) float64 {
	unit := 1.0
	for v/unit >= 1024 {
		unit *= 1024
	}
	return roundUp(v/unit) * unit
}

func perSecond(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f/s", v)
	}
	return fmt.Sprintf("%.2g/s", v)
}

func bytesPerSecond(v float64) string { return humanBytes(int64(v)) + "/s" }

// humanBytes writes n in binary units: 0 B, 512 B, 1.5 KiB, 20 GiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	if v >= 10 {
		return fmt.Sprintf("%.0f %ciB", v, "KMGTPE"[exp])
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTPE"[exp])
}

// shortDuration writes d > 0 as 2h, 10m, 1h30m or 2.4s.
func shortDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return strings.TrimSuffix(d.String(), "0s")
	}
	return d.Round(100 * time.Millisecond).String()
}

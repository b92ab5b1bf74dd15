package templates

import (
	"strconv"
	"time"

	"github.com/approvals/approvals/queue"
)

// OverviewView is the health of the queue (GET /overview).
type OverviewView struct {
	*queue.Overview
}

// Chart geometry, in SVG user units; the SVG scales to its box.
const (
	chartW, chartH   = 720, 220
	chartLeft        = 36 // room for the count axis labels
	chartTop         = 12
	chartBottom      = 28 // room for the hour labels
	chartPlotH       = chartH - chartTop - chartBottom
	chartSlot        = (chartW - chartLeft) / queue.OverviewHours
	chartBarW        = (chartSlot - 6) / 2
	chartLabelEveryH = 3
)

// ChartBar is one bar of the hourly chart with its position.
type ChartBar struct {
	X, Y, W, H string
	Class      string // bar-sub or bar-dec
	Title      string // what a pointer or screen reader is told
}

// ChartLabel is text on the chart.
type ChartLabel struct {
	X, Y, Text string
	// Class is "minor" for the labels a phone leaves out: scaled to its
	// width, every third hour would not fit at a readable size.
	Class string
}

// chartMax is the top of the count axis: the busiest hour, at least 1.
func (v OverviewView) chartMax() int64 {
	var m int64 = 1
	for _, h := range v.Hours {
		m = max(m, h.Submitted, h.Decided)
	}
	return m
}

// Bars lays out two bars per hour: submissions, then decisions.
func (v OverviewView) Bars() []ChartBar {
	m := v.chartMax()
	var out []ChartBar
	for i, h := range v.Hours {
		x := chartLeft + i*chartSlot + 3
		hour := h.Hour.UTC().Format("15:00")
		for j, n := range []int64{h.Submitted, h.Decided} {
			height := int(n * chartPlotH / m)
			b := ChartBar{X: itoa(x + j*chartBarW), Y: itoa(chartTop + chartPlotH - height), W: itoa(chartBarW), H: itoa(height)}
			if j == 0 {
				b.Class, b.Title = "bar-sub", hour+" UTC: "+Plural(int(n), "submission")
			} else {
				b.Class, b.Title = "bar-dec", hour+" UTC: "+Plural(int(n), "decision")
			}
			out = append(out, b)
		}
	}
	return out
}

// HourLabels names every third hour under the bars.
func (v OverviewView) HourLabels() []ChartLabel {
	var out []ChartLabel
	for i, h := range v.Hours {
		if i%chartLabelEveryH == 0 {
			l := ChartLabel{X: itoa(chartLeft + i*chartSlot + chartSlot/2), Y: itoa(chartH - 10), Text: h.Hour.UTC().Format("15:00"), Class: "hour"}
			if i%(2*chartLabelEveryH) != 0 {
				l.Class = "hour minor"
			}
			out = append(out, l)
		}
	}
	return out
}

// AxisLabels marks zero and the busiest hour's count.
func (v OverviewView) AxisLabels() []ChartLabel {
	return []ChartLabel{
		{X: itoa(chartLeft - 6), Y: itoa(chartTop + chartPlotH), Text: "0", Class: "count"},
		{X: itoa(chartLeft - 6), Y: itoa(chartTop + 8), Text: strconv.FormatInt(v.chartMax(), 10), Class: "count"},
	}
}

// ChartSummary describes the chart in one sentence for its <desc>.
func (v OverviewView) ChartSummary() string {
	var sub, dec int64
	for _, h := range v.Hours {
		sub += h.Submitted
		dec += h.Decided
	}
	return "Bars per hour from " + v.Hours[0].Hour.UTC().Format("2006-01-02 15:00") + " UTC: " +
		Plural(int(sub), "submission") + " and " + Plural(int(dec), "decision") + " in all."
}

// ViewBox is the chart's coordinate system.
func (v OverviewView) ViewBox() string { return "0 0 " + itoa(chartW) + " " + itoa(chartH) }

// AxisY is where the bars stand.
func (v OverviewView) AxisY() string { return itoa(chartTop + chartPlotH) }

// AxisRight is where the base line ends.
func (v OverviewView) AxisRight() string { return itoa(chartW) }

// AxisLeft is where the base line starts.
func (v OverviewView) AxisLeft() string { return itoa(chartLeft) }

// OldestAge is how long the oldest pending action has waited.
func (v OverviewView) OldestAge() string {
	if v.OldestPending == nil {
		return "—"
	}
	return age(v.Now, *v.OldestPending)
}

// waitSpan is a ticket wait of r, or a dash when no person resolved one.
func waitSpan(r queue.TicketResolutions, d time.Duration) string {
	if r.ByPerson == 0 {
		return "—"
	}
	return Span(d)
}

func itoa(n int) string { return strconv.Itoa(n) }

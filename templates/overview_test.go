package templates_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/approvals/approvals/queue"
	"github.com/approvals/approvals/templates"
)

// TestHourlyChart: bars are as tall as their counts (the busiest hour
// fills the plot), each says what it counts, and the chart is described.
func TestHourlyChart(t *testing.T) {
	t.Parallel()
	first := time.Date(2031, 3, 21, 10, 0, 0, 0, time.UTC)
	o := &queue.Overview{Now: first.Add(23*time.Hour + 30*time.Minute)}
	for i := range queue.OverviewHours {
		o.Hours = append(o.Hours, queue.HourCount{Hour: first.Add(time.Duration(i) * time.Hour)})
	}
	o.Hours[0].Submitted, o.Hours[0].Decided = 4, 2
	o.Hours[23].Submitted = 1
	var buf bytes.Buffer
	if err := templates.HourlyChart(templates.OverviewView{Overview: o}).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	var heights, titles []string
	desc := ""
	for n := range doc.Descendants() {
		if n.Type != html.ElementNode {
			continue
		}
		switch n.Data {
		case "rect":
			heights = append(heights, attr(n, "height"))
			titles = append(titles, text(n))
		case "desc":
			desc = text(n)
		}
	}
	if len(heights) != 48 {
		t.Fatalf("%d bars, want 48", len(heights))
	}
	// The plot is 180 units tall: 4 fills it, 2 is half, 1 a quarter.
	for i, want := range map[int]string{0: "180", 1: "90", 2: "0", 46: "45", 47: "0"} {
		if heights[i] != want {
			t.Errorf("bar %d is %s tall, want %s", i, heights[i], want)
		}
	}
	if titles[0] != "10:00 UTC: 4 submissions" || titles[1] != "10:00 UTC: 2 decisions" || titles[46] != "09:00 UTC: 1 submission" {
		t.Errorf("bar titles %q %q %q", titles[0], titles[1], titles[46])
	}
	if desc != "Bars per hour from 2031-03-21 10:00 UTC: 5 submissions and 2 decisions in all." {
		t.Errorf("desc %q", desc)
	}
}

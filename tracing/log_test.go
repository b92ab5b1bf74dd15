package tracing_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/approvals/approvals/tracing"
)

// TestLogHandlerNamesTheTrace: a line logged with a span's context names
// its trace and span; one without names none.
func TestLogHandlerNamesTheTrace(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "work")
	defer span.End()
	var out bytes.Buffer
	log := slog.New(tracing.LogHandler(slog.NewTextHandler(&out, nil))).With("component", "test")
	log.InfoContext(ctx, "inside")
	log.Info("outside")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines %q", lines)
	}
	sc := span.SpanContext()
	for _, want := range []string{"trace_id=" + sc.TraceID().String(), "span_id=" + sc.SpanID().String(), "component=test"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("line with a span %q lacks %s", lines[0], want)
		}
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("line without a span names one: %q", lines[1])
	}
}

// TestWanted: tracing is off unless an OTLP endpoint or an exporter is
// set, and OTEL_SDK_DISABLED or the exporter none turn it off.
func TestWanted(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false},
	} {
		if got := tracing.Wanted(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("Wanted(%v) = %v, want %v", tc.env, got, tc.want)
		}
	}
}

// TestSetupRefusesWhatItCannotSend: an exporter or protocol approvals does
// not speak is a start-up error naming the variable, not silence.
func TestSetupRefusesWhatItCannotSend(t *testing.T) {
	for _, env := range []map[string]string{
		{"OTEL_TRACES_EXPORTER": "zipkin"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
	} {
		_, err := tracing.Setup(context.Background(), func(k string) string { return env[k] })
		if err == nil || !strings.Contains(err.Error(), "OTEL_") {
			t.Errorf("Setup(%v): %v, want an error naming the variable", env, err)
		}
		if tracing.Enabled() {
			t.Errorf("Setup(%v) failed but turned tracing on", env)
		}
	}
}

// TestOffStartsNothing: off, Start hands back the caller's context and a
// span that records nothing, allocating nothing.
func TestOffStartsNothing(t *testing.T) {
	ctx := context.Background()
	got, span := tracing.Start(ctx, "x")
	if got != ctx || span.IsRecording() {
		t.Fatalf("off: Start changed the context or records")
	}
	if n := testing.AllocsPerRun(100, func() {
		_, s := tracing.Start(ctx, "x")
		s.End()
	}); n != 0 {
		t.Errorf("off: Start allocates %v times", n)
	}
}

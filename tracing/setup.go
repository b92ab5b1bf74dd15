package tracing

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ServiceName is the service.name of approvals' spans unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names another.
const ServiceName = "approvals"

// Wanted reports whether the environment asks for traces: an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or an
// exporter (OTEL_TRACES_EXPORTER) other than none, and not
// OTEL_SDK_DISABLED=true.
func Wanted(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if exp := getenv("OTEL_TRACES_EXPORTER"); exp != "" {
		return exp != "none"
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup turns tracing on when the environment asks for it (Wanted), with
// the OTLP exporter the standard variables describe: its protocol
// (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL:
// http/protobuf, the default, or grpc), endpoint, headers and timeout; the
// resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES; service.name
// approvals otherwise); the sampler (OTEL_TRACES_SAMPLER and _ARG,
// parentbased_always_on otherwise) and the batch processor (OTEL_BSP_*).
// shutdown flushes the spans not yet sent and turns tracing off; it is a
// no-op when tracing stayed off.
func Setup(ctx context.Context, getenv func(string) string) (shutdown func(context.Context) error, err error) {
	if !Wanted(getenv) {
		return func(context.Context) error { return nil }, nil
	}
	if exp := getenv("OTEL_TRACES_EXPORTER"); exp != "" && exp != "otlp" {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%s: approvals exports traces with otlp (or none)", exp)
	}
	protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exporter sdktrace.SpanExporter
	switch protocol {
	case "", "http/protobuf":
		exporter, err = otlptracehttp.New(ctx)
	case "grpc":
		exporter, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%s: approvals sends traces over http/protobuf or grpc", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// The environment's attributes win over the default service name.
	res, err := resource.Merge(resource.NewSchemaless(attribute.String("service.name", ServiceName)), envResource(ctx))
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	// No sampler here: the SDK reads OTEL_TRACES_SAMPLER itself.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	Use(tp)
	return func(ctx context.Context) error {
		Use(nil)
		return errors.Join(tp.ForceFlush(ctx), tp.Shutdown(ctx))
	}, nil
}

// envResource is the resource of OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES, with the process and SDK attributes.
func envResource(ctx context.Context) *resource.Resource {
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil && res == nil {
		return resource.Empty()
	}
	return res
}

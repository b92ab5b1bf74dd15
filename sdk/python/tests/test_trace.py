"""The SDK sends the caller's trace context (W3C traceparent, tracestate) with
each request: from the trace_context option, else through
opentelemetry.propagate.inject when opentelemetry is importable. A plain HTTP
server stands in for approvals and keeps the headers of what the SDK sent."""
import http.server
import json
import sys
import threading
import types
import unittest

import approvals.client
from approvals import Approvals

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class Capture(http.server.BaseHTTPRequestHandler):
    seen = []

    def do_GET(self):  # noqa: N802 - http.server's name
        Capture.seen.append({k.lower(): v for k, v in self.headers.items()})
        out = json.dumps({"tools": [], "guidance": ""}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


class TraceContextTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Capture)
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()
        cls.url = "http://127.0.0.1:%d" % cls.server.server_address[1]

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()

    def setUp(self):
        Capture.seen.clear()
        self.addCleanup(setattr, approvals.client, "_otel", False)  # look for opentelemetry again next time

    def test_trace_context_option(self):
        contexts = [{"traceparent": TRACEPARENT, "tracestate": "vendor=abc"}, None]
        client = Approvals(self.url, "t", trace_context=lambda: contexts.pop(0))
        client.tools()
        client.tools()
        first, second = Capture.seen
        self.assertEqual(first.get("traceparent"), TRACEPARENT)
        self.assertEqual(first.get("tracestate"), "vendor=abc")
        self.assertNotIn("traceparent", second)
        self.assertNotIn("tracestate", second)

    def test_opentelemetry_propagate_inject(self):
        # opentelemetry cannot be installed where these tests run (the SDK and
        # its tests use the standard library only), so a module with the one
        # function the SDK calls, opentelemetry.propagate.inject(carrier),
        # stands in for it: it writes the active context as the W3C
        # propagator does.
        active = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "congo=t61rcWkgMzE"}
        otel = types.ModuleType("opentelemetry")
        propagate = types.ModuleType("opentelemetry.propagate")
        propagate.inject = lambda carrier: carrier.update(active)
        otel.propagate = propagate
        saved = {k: sys.modules.get(k) for k in ("opentelemetry", "opentelemetry.propagate")}
        sys.modules.update({"opentelemetry": otel, "opentelemetry.propagate": propagate})
        try:
            approvals.client._otel = False
            Approvals(self.url, "t").tools()
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
        self.assertEqual(Capture.seen[0].get("traceparent"), active["traceparent"])
        self.assertEqual(Capture.seen[0].get("tracestate"), active["tracestate"])

    def test_without_opentelemetry_or_option_nothing_is_sent(self):
        saved = sys.modules.get("opentelemetry")
        sys.modules["opentelemetry"] = None  # an import of it fails, as when it is not installed
        try:
            approvals.client._otel = False
            Approvals(self.url, "t").tools()
        finally:
            if saved is None:
                sys.modules.pop("opentelemetry", None)
            else:
                sys.modules["opentelemetry"] = saved
        self.assertNotIn("traceparent", Capture.seen[0])


if __name__ == "__main__":
    unittest.main()

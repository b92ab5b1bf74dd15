import http.server
import json
import threading
import time
import unittest

from approvals import (Approvals, ApprovalsConnectionError, ApprovalsError, DryRunUnsupportedError, InProgressError,
                       IntentKeyRequiredError, IntentKeyReusedError, InvalidPayloadError, NotFoundError, RetryPolicy,
                       UnauthorizedError, UnavailableError)

from .server import Fixture, LossyProxy

fx = Fixture()
setUpModule = fx.start
tearDownModule = fx.stop


_n = [0]


def order():
    _n[0] += 1
    return "py-%d-%d" % (int(time.time()), _n[0])


class ClientTest(unittest.TestCase):
    def test_claim_then_in_progress_then_replay(self):
        payload = {"order_id": order(), "line_id": 1, "amount": 12.5}
        first = fx.approvals.submit("issue_refund", payload)
        self.assertTrue(first.created)
        self.assertEqual(first.action["state"], "in_progress")
        with self.assertRaises(InProgressError) as cm:
            fx.approvals.submit("issue_refund", payload)
        self.assertEqual(cm.exception.status, 409)
        self.assertEqual(cm.exception.action["id"], first.action["id"])
        self.assertEqual(fx.approvals.complete(first.action["id"], {"refund_id": "re_1"})["state"], "done")
        again = fx.approvals.submit("issue_refund", payload)
        self.assertFalse(again.created)
        self.assertTrue(again.replayed)
        self.assertEqual(again.action["result"], {"refund_id": "re_1"})
        found = fx.approvals.find(intent_key="refund:%s:1" % payload["order_id"])
        self.assertEqual([a["id"] for a in found["actions"]], [first.action["id"]])
        self.assertIsNone(found["next_cursor"])

    def test_problems_are_typed_errors(self):
        payload = {"order_id": order(), "line_id": 1, "amount": 1}
        held = fx.approvals.submit("issue_refund", payload).action
        with self.assertRaises(IntentKeyReusedError) as cm:
            fx.approvals.submit("issue_refund", dict(payload, amount=2))
        self.assertEqual(cm.exception.code, "intent_key_reused")
        self.assertEqual(cm.exception.action["id"], held["id"])
        with self.assertRaises(InvalidPayloadError) as cm:
            fx.approvals.submit("issue_refund", {"order_id": "x"})
        self.assertIn("line_id", cm.exception.detail)
        with self.assertRaises(IntentKeyRequiredError):
            fx.approvals.submit("not_in_the_file", {"a": 1})
        with self.assertRaises(NotFoundError):
            fx.approvals.get("no-such-action")
        with self.assertRaises(UnauthorizedError) as cm:
            Approvals(fx.server.url, "apv_not-a-token").tools()
        self.assertIsInstance(cm.exception, ApprovalsError)
        self.assertEqual([t["name"] for t in fx.approvals.tools()["tools"]], ["invalidate_cache", "issue_refund", "send_customer_email"])

    def test_get_with_wait_long_polls_until_decided(self):
        a = fx.approvals.submit("send_customer_email", {"customer_id": order(), "topic": "welcome"}).action
        threading.Timer(0.3, lambda: fx.staff.decide(a["id"], "approve", "fine")).start()
        started = time.monotonic()
        decided = fx.approvals.get(a["id"], wait="30s")
        self.assertEqual(decided["state"], "approved")
        self.assertLess(time.monotonic() - started, 10)
        # A wait that runs out answers the action as it is.
        b = fx.approvals.submit("send_customer_email", {"customer_id": order(), "topic": "welcome"}).action
        self.assertEqual(fx.approvals.get(b["id"], wait=0.5)["state"], "pending")

    def test_lost_submission_answer_is_retried_and_in_progress_is_no_permission(self):
        proxy = LossyProxy(fx.server.url)
        try:
            drops = []
            proxy.drop = lambda line: line.startswith("POST /api/v1/actions ") and not drops and not drops.append(1)
            c = Approvals(proxy.url, fx.server.token, retry=RetryPolicy(base_delay=0.01))
            with self.assertRaises(InProgressError):
                c.submit("issue_refund", {"order_id": order(), "line_id": 1, "amount": 1})
            self.assertEqual(len(proxy.dropped), 1)
        finally:
            proxy.close()

    def test_lost_execute_is_not_retried(self):
        proxy = LossyProxy(fx.server.url)
        try:
            c = Approvals(proxy.url, fx.server.token, retry=RetryPolicy(base_delay=0.01))
            a = c.submit("send_customer_email", {"customer_id": order(), "topic": "welcome"}).action
            fx.staff.decide(a["id"], "approve")
            proxy.drop = lambda line: "/execute" in line
            with self.assertRaises(ApprovalsConnectionError):
                c.execute(a["id"])
            self.assertEqual(len(proxy.dropped), 1)
            self.assertEqual(fx.server.rest("/api/v1/actions/" + a["id"])["state"], "in_progress")
        finally:
            proxy.close()


class _Stub(http.server.BaseHTTPRequestHandler):
    hits = []
    answer = None

    def do_GET(self):
        self._answer()

    def do_POST(self):
        self._answer()

    def _answer(self):
        _Stub.hits.append((time.monotonic(), "%s %s" % (self.command, self.path)))
        status, headers, body = _Stub.answer
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        data = json.dumps(body).encode()
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class RetryLayerTest(unittest.TestCase):
    def setUp(self):
        self.stub = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
        threading.Thread(target=self.stub.serve_forever, daemon=True).start()
        self.url = "http://127.0.0.1:%d" % self.stub.server_address[1]
        _Stub.hits = []

    def tearDown(self):
        self.stub.shutdown()
        self.stub.server_close()

    def test_retry_after_is_honoured_bounded_and_execute_never_repeats(self):
        _Stub.answer = (503, {"Content-Type": "application/problem+json", "Retry-After": "1"},
                        {"type": "about:blank", "title": "Service Unavailable", "status": 503,
                         "detail": "storage is unreachable", "code": "unavailable"})
        c = Approvals(self.url, "t", retry=RetryPolicy(attempts=3, base_delay=0.01))
        with self.assertRaises(UnavailableError):
            c.get("a1")
        self.assertEqual(len(_Stub.hits), 3)
        self.assertGreaterEqual(_Stub.hits[1][0] - _Stub.hits[0][0], 0.95)
        self.assertGreaterEqual(_Stub.hits[2][0] - _Stub.hits[1][0], 0.95)
        _Stub.hits = []
        with self.assertRaises(UnavailableError):
            c.execute("a1")
        self.assertEqual(len(_Stub.hits), 1)

    def test_dry_run_is_never_sent_to_a_server_that_does_not_offer_it(self):
        _Stub.answer = (200, {"Content-Type": "application/json"},
                        {"openapi": "3.1.0", "paths": {"/api/v1/actions": {"post": {"parameters": [{"name": "Idempotency-Key", "in": "header"}]}}}})
        with self.assertRaises(DryRunUnsupportedError):
            Approvals(self.url, "t").dry_run("issue_refund", {"order_id": "o", "line_id": 1})
        self.assertEqual([h[1] for h in _Stub.hits], ["GET /api/v1/openapi.json"])


if __name__ == "__main__":
    unittest.main()

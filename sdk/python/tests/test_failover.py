"""docs/operations.md, "Replication and failover": while the server or its database is away (a failover),
the SDK retries the calls that are safe to repeat for up to 60 s, honouring
Retry-After, with backoff and jitter; it never repeats an execute. Against the
real server, stopped and started again on the same address and SQLite file,
and against a proxy that answers 503 first."""
import http.client
import http.server
import json
import threading
import time
import unittest
import urllib.parse

from approvals import Approvals, ApprovalsConnectionError, RetryPolicy, UnavailableError

from .server import Server, Staff, free_port

_n = [0]


def order():
    _n[0] += 1
    return "pf-%d-%d" % (int(time.time()), _n[0])


def later(seconds, fn):
    t = threading.Timer(seconds, fn)
    t.start()
    return t


class FailoverTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(port=free_port())
        cls.staff = Staff(cls.server.url).login()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_default_budget_is_60s_with_jittered_backoff(self):
        p = RetryPolicy()
        self.assertEqual((p.budget, p.attempts), (60.0, None))
        self.assertIsNone(p.next_retry(1, 0.5, retry_after=2.0), "a Retry-After past the budget: no retry")
        self.assertIsNone(p.next_retry(1, 0.0), "the budget is spent")
        self.assertEqual(p.next_retry(1, 30.0, retry_after=2.0), 2.0)
        self.assertLessEqual(p.next_retry(30, 1.0), 1.0, "a backoff ends with the budget")
        waits = {p.next_retry(3, 30.0) for _ in range(20)}
        self.assertGreater(len(waits), 1, "jittered")
        self.assertTrue(all(0 <= w <= 0.8 for w in waits))
        self.assertIsNone(RetryPolicy(attempts=3).next_retry(3, 30.0), "the tries are spent")

    def test_guarded_call_survives_the_server_stopping_before_submission_and_after_the_effect(self):
        c = Approvals(self.server.url, self.server.token)
        effects = []
        threads = []

        @c.guard("issue_refund")
        def issue_refund(payload):
            effects.append(payload["order_id"])
            # The effect happened; the server goes away before complete is sent.
            self.server.halt()
            threads.append(later(1.5, self.server.resume))
            return {"refund_id": "re_%d" % len(effects)}

        p = {"order_id": order(), "line_id": 1, "amount": 4}
        self.server.halt()  # away before the submission too
        threads.append(later(1.5, self.server.resume))
        started = time.monotonic()
        self.assertEqual(issue_refund(p), {"refund_id": "re_1"})
        for t in threads:
            t.join()
        self.assertGreaterEqual(time.monotonic() - started, 3.0, "both outages were waited out")
        self.assertEqual(effects, [p["order_id"]])
        actions = self.server.rest("/api/v1/actions?" + urllib.parse.urlencode(
            {"intent_key": "refund:%s:1" % p["order_id"]}))["actions"]
        self.assertEqual([(a["attempt"], a["state"], a["result"]) for a in actions], [(1, "done", {"refund_id": "re_1"})])

    def test_execute_is_never_repeated_while_the_server_is_away(self):
        c = Approvals(self.server.url, self.server.token)
        sub = c.submit("send_customer_email", {"customer_id": order(), "topic": "welcome", "subject": "Hi"})
        self.staff.decide(sub.action["id"], "approve", "ok")
        self.server.halt()
        try:
            started = time.monotonic()
            with self.assertRaises(ApprovalsConnectionError):
                c.execute(sub.action["id"])
            self.assertLess(time.monotonic() - started, 1.0, "no retry")
        finally:
            self.server.resume()
        self.assertEqual(c.get(sub.action["id"])["state"], "approved", "nothing was claimed")

    def test_503_with_retry_after_then_through_once(self):
        gate = _Gate(self.server.url)
        try:
            later(2.5, gate.open)
            c = Approvals(gate.url, self.server.token)
            sub = c.submit("issue_refund", {"order_id": order(), "line_id": 1, "amount": 2})
            self.assertTrue(sub.created)
            self.assertEqual(sub.action["state"], "in_progress")
            posts = [h for h in gate.hits if h[1].startswith("POST")]
            self.assertGreaterEqual(len(posts), 3)
            for a, b in zip(posts, posts[1:]):
                self.assertGreaterEqual(b[0] - a[0], 0.95, "each retry waited Retry-After")
            self.assertFalse(posts[-1][2], "the last try went through")
        finally:
            gate.close()

    def test_retries_stop_at_the_budget(self):
        gate = _Gate(self.server.url)
        try:
            c = Approvals(gate.url, self.server.token, retry=RetryPolicy(budget=2.5))
            started = time.monotonic()
            with self.assertRaises(UnavailableError):
                c.get("a1")
            took = time.monotonic() - started
            self.assertTrue(1.9 <= took < 3.5, "gave up after %.1fs" % took)
            self.assertEqual(len(gate.hits), 3, "tries at 0, 1 and 2 s")
            gate.hits.clear()
            gate.retry_after = 120
            started = time.monotonic()
            with self.assertRaises(UnavailableError):
                c.get("a1")
            self.assertLess(time.monotonic() - started, 0.5)
            self.assertEqual(len(gate.hits), 1)
        finally:
            gate.close()

    def test_long_poll_meeting_503_at_the_end_of_its_wait_is_retried(self):
        # The budget does not count a long-poll's wait: a poll that waited
        # longer than the budget and met the database gone at its end is
        # retried as any other read.
        c = Approvals(self.server.url, self.server.token)
        sub = c.submit("send_customer_email", {"customer_id": order(), "topic": "welcome", "subject": "Hi"})
        gate = _Gate(self.server.url, late=True)
        try:
            c = Approvals(gate.url, self.server.token, retry=RetryPolicy(budget=3.0))
            started = time.monotonic()
            later(5.5, gate.open)
            a = c.get(sub.action["id"], wait=4, state="pending")
            self.assertEqual(a["state"], "pending")
            gets = [h for h in gate.hits if h[1].startswith("GET")]
            self.assertTrue(len(gets) >= 2 and gets[0][2] and not gets[-1][2], gets)
            self.assertGreaterEqual(time.monotonic() - started, 5.5, "the retries waited the outage out")
        finally:
            gate.close()

    def test_an_answer_cut_short_is_retried_as_a_lost_one(self):
        # A 503 whose body never arrives whole is a lost answer: the read is
        # retried, as after a dropped connection, not raised as it came.
        sub = Approvals(self.server.url, self.server.token).submit(
            "send_customer_email", {"customer_id": order(), "topic": "welcome", "subject": "Hi"})
        gate = _Gate(self.server.url)
        gate.cut = True
        try:
            c = Approvals(gate.url, self.server.token)
            self.assertEqual(c.get(sub.action["id"])["state"], "pending")
            self.assertEqual([h[2] for h in gate.hits], [True, False], "cut once, then through")
        finally:
            gate.close()


class _Gate:
    """A proxy to the server that answers 503 unavailable with Retry-After until open().
    ``late``: it passes each request on first and answers 503 in place of the server's
    answer, as a long-poll that met the database gone at the end of its wait."""

    def __init__(self, target, late=False):
        gate = self
        # cut: the 503's body is cut short and the connection closed, once
        self.down, self.retry_after, self.hits, self.cut = True, 1, [], False
        up = urllib.parse.urlsplit(target)

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                answer = self._forward(body) if late else None
                down = gate.down
                gate.hits.append((time.monotonic(), "%s %s" % (self.command, self.path), down))
                if down:
                    data = json.dumps({"type": "about:blank", "title": "Service Unavailable", "status": 503,
                                       "detail": "storage is unreachable", "code": "unavailable"}).encode()
                    self.send_response(503)
                    self.send_header("Content-Type", "application/problem+json")
                    self.send_header("Retry-After", str(gate.retry_after))
                    if gate.cut:
                        gate.down, data = False, data[:10]
                        self.close_connection = True
                        self.send_header("Content-Length", str(len(data) + 100))
                    else:
                        self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                status, headers, data = answer or self._forward(body)
                self.send_response(status)
                for k, v in headers:
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _forward(self, body):
                conn = http.client.HTTPConnection(up.hostname, up.port, timeout=90)
                try:
                    conn.request(self.command, self.path, body=body or None,
                                 headers={k: v for k, v in self.headers.items() if k.lower() != "host"})
                    res = conn.getresponse()
                    return res.status, res.getheaders(), res.read()
                finally:
                    conn.close()

            do_GET = do_POST = _any

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]

    def open(self):
        self.down = False

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


if __name__ == "__main__":
    unittest.main()

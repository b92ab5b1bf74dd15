"""The guard after an unknown outcome (contract section 18): it asks the tool's
verifier once. The verifier is a real webhook: a local HTTP server that answers
as a payment provider's refund lookup would."""
import base64
import http.server
import json
import threading
import time
import unittest

from approvals import NoVerifierError, OutcomeUnknownError, TooManyChecksError

from .server import Fixture


class Provider(http.server.BaseHTTPRequestHandler):
    """The payment provider: its refunds, and a lookup of an order's refunds as the verifier asks it."""

    refunds = []
    lookups = [0]

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        Provider.lookups[0] += 1
        action = body.get("action") or {}
        signed = (self.headers.get("webhook-signature") or "").startswith("v1,")
        if self.path != "/refunds/lookup" or not signed or "order_id" not in (action.get("payload") or {}):
            self.send_response(400)
            self.end_headers()
            return
        refunds = [r for r in Provider.refunds if r["order_id"] == action["payload"]["order_id"]]
        out = json.dumps({"refunds": refunds}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


provider = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Provider)


def verified_tool(name, resolve):
    return """  %s:
    class: exactly-once
    intent: "%s:{order_id}:{line_id}"
    claim_timeout: 2m
    verify:
      webhook: http://127.0.0.1:%d/refunds/lookup
      timeout: 5s
      done: 'response.refunds.exists(r, r.line_id == payload.line_id)'
      not_done: '!response.refunds.exists(r, r.line_id == payload.line_id)'
      result: 'response.refunds.filter(r, r.line_id == payload.line_id)[0]'
      settle: 1h
      resolve: %s
""" % (name, name, provider.server_address[1], resolve)


def tools():
    threading.Thread(target=provider.serve_forever, daemon=True).start()
    return ("tools:\n" + verified_tool("issue_refund", "auto") + verified_tool("suggest_refund", "suggest") +
            '  plain_refund:\n    class: exactly-once\n    intent: "plain_refund:{order_id}:{line_id}"\n')


fx = Fixture(tools=tools, env={"APPROVALS_WEBHOOK_SECRET": "whsec_" + base64.b64encode(
    b"a test secret of 32 bytes length").decode()})


def setUpModule():
    fx.start()


def tearDownModule():
    fx.stop()
    provider.shutdown()
    provider.server_close()


def lost_answer(tool, calls):
    """A refund whose provider acts, then the answer is lost (a timeout after the effect)."""

    @fx.approvals.guard(tool)
    def refund(p):
        calls.append(p)
        Provider.refunds.append({"id": "re_%d" % (len(Provider.refunds) + 1), "order_id": p["order_id"],
                                 "line_id": p["line_id"], "amount": p["amount"]})
        raise ConnectionResetError("connection reset by peer")

    return refund


class VerifyTest(unittest.TestCase):
    def test_lost_answer_after_the_refund_returns_the_providers_record(self):
        calls = []
        refund = lost_answer("issue_refund", calls)
        p = {"order_id": "py-v1", "line_id": "l-2", "amount": 12.5}
        lookups = Provider.lookups[0]
        result = refund(p)
        self.assertEqual(result["order_id"], "py-v1")
        self.assertEqual(result["line_id"], "l-2")
        self.assertTrue(result["id"].startswith("re_"))
        self.assertEqual(Provider.lookups[0], lookups + 1, "one check")
        a = fx.approvals.find(intent_key="issue_refund:py-v1:l-2")["actions"][0]
        self.assertEqual(a["state"], "done")
        self.assertEqual(a["result"], result)
        status, page = fx.staff.request("GET", "/actions/" + a["id"])
        self.assertEqual(status, 200)
        self.assertIn("verifier:issue_refund", page)
        # The retry gets the provider's record replayed; the refund is never sent again.
        self.assertEqual(refund(p), result)
        self.assertEqual(len(calls), 1)
        self.assertEqual(len([r for r in Provider.refunds if r["order_id"] == "py-v1"]), 1)

    def test_effect_never_reached_the_provider_raises_with_the_unknown_check(self):
        calls = []

        @fx.approvals.guard("issue_refund")
        def refund(p):
            calls.append(p)
            raise TimeoutError("connect timed out")

        with self.assertRaises(OutcomeUnknownError) as cm:
            refund({"order_id": "py-v2", "line_id": "l-1", "amount": 3})
        self.assertIn("connect timed out", str(cm.exception))
        self.assertEqual(cm.exception.check["verdict"], "unknown")  # not_done only counts after settle
        self.assertEqual(cm.exception.check["action"]["state"], "in_progress")
        self.assertEqual(len(calls), 1)
        self.assertEqual(fx.approvals.find(intent_key="issue_refund:py-v2:l-1")["actions"][0]["state"], "in_progress")

    def test_suggest_only_raises_with_the_done_check(self):
        calls = []
        with self.assertRaises(OutcomeUnknownError) as cm:
            lost_answer("suggest_refund", calls)({"order_id": "py-v3", "line_id": "l-1", "amount": 5})
        self.assertEqual(cm.exception.check["verdict"], "done")
        self.assertEqual(cm.exception.check["action"]["state"], "in_progress")
        self.assertEqual(len(calls), 1)

    def test_no_verifier_and_too_many_checks_raise_at_once(self):
        @fx.approvals.guard("plain_refund")
        def plain(p):
            raise ConnectionResetError("reset")

        with self.assertRaises(OutcomeUnknownError) as cm:
            plain({"order_id": "py-v4", "line_id": "l-1", "amount": 1})
        self.assertIsInstance(cm.exception.check, NoVerifierError)

        # The function asked just before failing: the guard's own ask is
        # refused (429 too_many_checks) and not retried after Retry-After.
        def ask_then_fail(p):
            a = fx.approvals.find(intent_key="issue_refund:%s:%s" % (p["order_id"], p["line_id"]))["actions"][0]
            fx.approvals.verify(a["id"])
            raise ConnectionResetError("reset")

        started = time.monotonic()
        with self.assertRaises(OutcomeUnknownError) as cm:
            fx.approvals.guard("issue_refund")(ask_then_fail)({"order_id": "py-v5", "line_id": "l-1", "amount": 1})
        self.assertIsInstance(cm.exception.check, TooManyChecksError)
        self.assertLess(time.monotonic() - started, 5)

    def test_verify_false_asks_nothing_and_the_error_can_ask(self):
        @fx.approvals.guard("issue_refund", verify=False)
        def refund(p):
            raise ConnectionResetError("reset")

        lookups = Provider.lookups[0]
        with self.assertRaises(OutcomeUnknownError) as cm:
            refund({"order_id": "py-v6", "line_id": "l-1", "amount": 1})
        self.assertIsNone(cm.exception.check)
        self.assertEqual(Provider.lookups[0], lookups)
        self.assertEqual(cm.exception.verify()["verdict"], "unknown")
        self.assertEqual(Provider.lookups[0], lookups + 1)


if __name__ == "__main__":
    unittest.main()

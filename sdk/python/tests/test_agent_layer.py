"""The agent-layer test (docs/sdk.md, "Agent frameworks"), with a scripted agent loop: a
guarded tool whose first call performs the effect and then loses the answer
(a proxy between the SDK and the server drops every answer to the report
once the server has acted), and whose second call is rephrased: same intent,
other wording. The world sees exactly one effect, for an exactly-once and
for an at-most-once tool."""
import threading
import unittest

from approvals import Approvals, IntentKeyReusedError, OutcomeUnknownError, RetryPolicy

from .server import LossyProxy, Server, Staff

server = staff = proxy = approvals = None


def setUpModule():
    global server, staff, proxy, approvals
    server = Server()
    staff = Staff(server.url).login()
    proxy = LossyProxy(server.url)
    # The proxy loses every answer to the first call's report: a short retry
    # budget ends its retries (the default, 60 s, is for a failover).
    approvals = Approvals(proxy.url, server.token, retry=RetryPolicy(base_delay=0.02, budget=2.0))


def tearDownModule():
    proxy.close()
    server.stop()


def agent_loop(tool, calls):
    """What a model does: call the tool; when the call fails, rephrase and
    call again. Returns what each call answered."""
    transcript = []
    for payload in calls:
        try:
            transcript.append(("ok", tool(payload)))
            break
        except Exception as e:  # noqa: BLE001 - the model reads the error
            transcript.append(("error", e))
    return transcript


class AgentLayerTest(unittest.TestCase):
    def test_exactly_once(self):
        world = []

        @approvals.guard("issue_refund")
        def issue_refund(payload):
            world.append(payload)
            return {"refund_id": "re_%d" % len(world)}

        proxy.drop = lambda line: "/complete" in line and len(world) == 1
        transcript = agent_loop(issue_refund, [
            {"order_id": "PY-1", "line_id": 2, "amount": 19.9, "reason": "Customer was charged twice."},
            {"order_id": "PY-1", "line_id": 2, "amount": 19.9, "reason": "Refund the duplicate charge on line 2."},
        ])
        self.assertEqual(len(world), 1, "exactly one real refund")
        (k1, e1), (k2, e2) = transcript
        self.assertIsInstance(e1, OutcomeUnknownError)
        self.assertTrue(e1.performed)
        self.assertIn("do not call this tool again", str(e1))
        self.assertIsInstance(e2, IntentKeyReusedError)
        self.assertTrue(any("/complete" in line for line in proxy.dropped))
        actions = server.rest("/api/v1/actions?intent_key=refund:PY-1:2")["actions"]
        self.assertEqual([a["state"] for a in actions], ["done"])

    def test_at_most_once(self):
        world = []

        @approvals.guard("send_customer_email", wait_for="30s")
        def send_customer_email(payload):
            world.append(payload)
            return {"message_id": "m_%d" % len(world)}

        def approve():
            staff.decide(server.pending("email:py-c7:refund")["id"], "approve", "ok to send")

        t = threading.Thread(target=approve)
        t.start()
        proxy.drop = lambda line: "/complete" in line and len(world) == 1
        transcript = agent_loop(send_customer_email, [
            {"customer_id": "py-c7", "topic": "refund", "subject": "Your refund", "body": "We refunded the charge."},
            {"customer_id": "py-c7", "topic": "refund", "subject": "Refund issued", "body": "Your refund is on its way."},
        ])
        t.join()
        self.assertEqual(len(world), 1, "exactly one real email")
        self.assertEqual(world[0]["subject"], "Your refund")
        self.assertIsInstance(transcript[0][1], OutcomeUnknownError)
        self.assertIsInstance(transcript[1][1], IntentKeyReusedError)
        actions = server.rest("/api/v1/actions?intent_key=email:py-c7:refund")["actions"]
        self.assertEqual([a["state"] for a in actions], ["done"])


if __name__ == "__main__":
    unittest.main()

"""dry_run against the real server: POST /api/v1/actions?dry_run=true
(docs/api.md, "Dry run"). A server without it makes these tests fail with
DryRunUnsupportedError."""
import unittest

from approvals import Approvals, InvalidPayloadError

from .server import Server

server = approvals = None


def setUpModule():
    global server, approvals
    server = Server()
    approvals = Approvals(server.url, server.token)


def tearDownModule():
    server.stop()


class DryRunTest(unittest.TestCase):
    def test_outcomes_of_new_submissions_and_nothing_written(self):
        self.assertEqual(approvals.dry_run("issue_refund", {"order_id": "pd-1", "line_id": 1, "amount": 3})["outcome"], "claim")
        self.assertEqual(approvals.dry_run("invalidate_cache", {"key": "k"})["outcome"], "record")
        self.assertEqual(approvals.dry_run("send_customer_email", {"customer_id": "pd", "topic": "t"})["outcome"], "human")
        self.assertEqual(approvals.find(intent_key="refund:pd-1:1")["actions"], [])
        self.assertEqual(approvals.find(tool="invalidate_cache")["actions"], [])

    def test_held_intents(self):
        email = {"customer_id": "pd-2", "topic": "t"}
        pending = approvals.submit("send_customer_email", email).action
        r = approvals.dry_run("send_customer_email", email)
        self.assertEqual((r["outcome"], r["action"]["id"]), ("replay", pending["id"]))
        refund = {"order_id": "pd-2", "line_id": 1, "amount": 3}
        claim = approvals.submit("issue_refund", refund).action
        r = approvals.dry_run("issue_refund", refund)
        self.assertEqual((r["outcome"], r["action"]["id"]), ("in_progress", claim["id"]))
        r = approvals.dry_run("issue_refund", dict(refund, amount=4))
        self.assertEqual((r["outcome"], r["action"]["id"]), ("conflict", claim["id"]))

    def test_refuses_what_a_submission_refuses(self):
        with self.assertRaises(InvalidPayloadError):
            approvals.dry_run("issue_refund", {"order_id": "x"})


if __name__ == "__main__":
    unittest.main()

import threading
import time
import unittest

from approvals import (ChangesRequestedError, InProgressError, IntentKeyReusedError, NotPerformedError,
                       OutcomeConflictError, OutcomeUnknownError, RejectedError, StillPendingError)

from .server import Fixture

fx = Fixture()
setUpModule = fx.start
tearDownModule = fx.stop


_n = [0]


def key():
    _n[0] += 1
    return "g-%d-%d" % (int(time.time()), _n[0])


def decide_when_pending(intent_key, decision, note=""):
    def run():
        fx.staff.decide(fx.server.pending(intent_key)["id"], decision, note)

    t = threading.Thread(target=run)
    t.start()
    return t


class GuardTest(unittest.TestCase):
    def test_claim_runs_once_and_replays(self):
        refunds = []

        @fx.approvals.guard("issue_refund")
        def issue_refund(order_id, line_id, amount):
            refunds.append(order_id)
            return {"refund_id": "re_%d" % len(refunds), "amount": amount}

        o = key()
        self.assertEqual(issue_refund(order_id=o, line_id=1, amount=9), {"refund_id": "re_1", "amount": 9})
        self.assertEqual(issue_refund(order_id=o, line_id=1, amount=9), {"refund_id": "re_1", "amount": 9})
        self.assertEqual(refunds, [o])
        self.assertEqual(issue_refund.__name__, "issue_refund")

    def test_not_performed_reports_fail_and_releases(self):
        calls = []

        @fx.approvals.guard("issue_refund")
        def issue_refund(payload):
            calls.append(1)
            if len(calls) == 1:
                raise NotPerformedError("card declined")
            return "ok"

        p = {"order_id": key(), "line_id": 1, "amount": 3}
        with self.assertRaises(NotPerformedError):
            issue_refund(p)
        attempts = fx.approvals.find(intent_key="refund:%s:1" % p["order_id"])["actions"]
        self.assertEqual([(a["state"], a["error"]) for a in attempts], [("failed", "card declined")])
        self.assertEqual(issue_refund(p), "ok")
        attempts = fx.approvals.find(intent_key="refund:%s:1" % p["order_id"])["actions"]
        self.assertEqual([(a["attempt"], a["state"]) for a in attempts], [(2, "done"), (1, "failed")])

    def test_outcome_conflict_after_the_function_ran_says_performed(self):
        # Hardening round 3: after the function returned, the effect happened;
        # a complete that meets another stored outcome (a fail recorded
        # meanwhile, as an operator resolving a stale claim would) says so,
        # and the guard never reports fail.
        calls = []
        p = {"order_id": key(), "line_id": 1, "amount": 7}
        intent = "refund:%s:1" % p["order_id"]

        @fx.approvals.guard("issue_refund")
        def issue_refund(payload):
            calls.append(1)
            [claimed] = fx.approvals.find(intent_key=intent)["actions"]
            fx.approvals.fail(claimed["id"], "resolved as not sent")
            return {"refund_id": "re_late", "amount": payload["amount"]}

        with self.assertRaises(OutcomeConflictError) as cm:
            issue_refund(p)
        e = cm.exception
        self.assertEqual(e.code, "outcome_conflict")
        self.assertTrue(e.performed)
        self.assertEqual(e.result, {"refund_id": "re_late", "amount": 7})
        self.assertIn("the effect happened", str(e))
        self.assertIn("do not call this tool again", str(e))
        [a] = fx.approvals.find(intent_key=intent)["actions"]
        self.assertEqual((a["state"], a["error"]), ("failed", "resolved as not sent"))
        self.assertEqual((a["ticket"]["kind"], a["ticket"]["state"]), ("conflict", "open"))
        self.assertEqual(calls, [1])

    def test_outcome_conflict_of_a_report_the_guard_did_not_make(self):
        sub = fx.approvals.submit("issue_refund", {"order_id": key(), "line_id": 1, "amount": 1})
        fx.approvals.complete(sub.action["id"], {"refund_id": "re_1"})
        with self.assertRaises(OutcomeConflictError) as cm:
            fx.approvals.fail(sub.action["id"], "no")
        self.assertFalse(cm.exception.performed)
        self.assertIsNone(cm.exception.result)

    def test_other_exception_is_outcome_unknown_and_never_fail(self):
        calls = []

        @fx.approvals.guard("issue_refund")
        def issue_refund(payload):
            calls.append(1)
            raise TimeoutError("the payment provider did not answer")

        p = {"order_id": key(), "line_id": 1, "amount": 3}
        with self.assertRaises(OutcomeUnknownError) as cm:
            issue_refund(p)
        self.assertFalse(cm.exception.performed)
        [held] = fx.approvals.find(intent_key="refund:%s:1" % p["order_id"])["actions"]
        self.assertEqual(held["state"], "in_progress")
        with self.assertRaises(InProgressError):
            issue_refund(p)
        self.assertEqual(len(calls), 1)

    def test_at_most_once_waits_and_runs_the_approved_payload(self):
        sent = []

        @fx.approvals.guard("send_customer_email", wait_for="30s")
        def send(payload):
            sent.append(payload)
            return {"message_id": "m-1"}

        customer = key()
        intent = "email:%s:welcome" % customer

        def approve_edited():
            a = fx.server.pending(intent)
            csrf = fx.staff.csrf("/actions/" + a["id"])
            status, _ = fx.staff.request("POST", "/actions/%s/approve" % a["id"], {
                "_csrf": csrf, "note": "kinder",
                "payload": '{"customer_id": "%s", "topic": "welcome", "body": "Hello, kindly"}' % customer})
            assert status == 303, status

        t = threading.Thread(target=approve_edited)
        t.start()
        self.assertEqual(send({"customer_id": customer, "topic": "welcome", "body": "Hello"}), {"message_id": "m-1"})
        t.join()
        self.assertEqual(sent, [{"customer_id": customer, "topic": "welcome", "body": "Hello, kindly"}])

    def test_rejection_and_changes_carry_the_note(self):
        calls = []

        @fx.approvals.guard("send_customer_email", wait_for="30s")
        def send(payload):
            calls.append(1)

        c = key()
        decide_when_pending("email:%s:promo" % c, "reject", "no promotions")
        with self.assertRaises(RejectedError) as cm:
            send({"customer_id": c, "topic": "promo"})
        self.assertEqual(cm.exception.note, "no promotions")
        c = key()
        decide_when_pending("email:%s:promo" % c, "request-changes", "name the products")
        with self.assertRaises(ChangesRequestedError) as cm:
            send({"customer_id": c, "topic": "promo"})
        self.assertEqual(cm.exception.note, "name the products")
        self.assertIn("submit again with the same intent key", str(cm.exception))
        self.assertEqual(calls, [])

    def test_still_pending_then_picks_up_the_approval(self):
        calls = []

        @fx.approvals.guard("send_customer_email", wait_for=0.5)
        def send(payload):
            calls.append(1)
            return len(calls)

        p = {"customer_id": key(), "topic": "welcome"}
        with self.assertRaises(StillPendingError):
            send(p)
        fx.staff.decide(fx.server.pending("email:%s:welcome" % p["customer_id"])["id"], "approve")
        self.assertEqual(send(p), 1)

    def test_rephrased_call_is_refused_without_a_call(self):
        calls = []

        @fx.approvals.guard("issue_refund")
        def issue_refund(payload):
            calls.append(payload)

        o = key()
        issue_refund({"order_id": o, "line_id": 1, "amount": 5, "reason": "double charge"})
        with self.assertRaises(IntentKeyReusedError):
            issue_refund({"order_id": o, "line_id": 1, "amount": 5, "reason": "charged twice"})
        self.assertEqual(len(calls), 1)

    def test_at_least_once_runs_every_time(self):
        calls = []

        @fx.approvals.guard("invalidate_cache")
        def invalidate(payload):
            calls.append(1)

        invalidate({"key": "k"})
        invalidate({"key": "k"})
        self.assertEqual(len(calls), 2)

    def test_an_async_function_is_refused_when_decorated(self):
        # The guard is synchronous: an async function would return its
        # coroutine unrun while the guard took the claim and reported the
        # effect as performed. It is refused before anything is submitted.
        with self.assertRaises(TypeError) as cm:
            @fx.approvals.guard("issue_refund")
            async def issue_refund(payload):
                return {"refund_id": "re_1"}

            o = key()
            try:
                issue_refund({"order_id": o, "line_id": 1, "amount": 1})
            finally:
                self.assertEqual(fx.approvals.find(intent_key="refund:%s:1" % o)["actions"], [])
        self.assertIn("async", str(cm.exception))

    def test_payload_is_one_dict_or_keywords(self):
        @fx.approvals.guard("invalidate_cache")
        def invalidate(payload):
            return payload

        with self.assertRaises(TypeError):
            invalidate({"a": 1}, {"b": 2})


if __name__ == "__main__":
    unittest.main()

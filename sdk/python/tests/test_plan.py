"""Approvals.plan against the real server (contract section 19): one decision
for three steps, each step performed once, a step that differs from the plan
refused with nothing stored, and the plan's refusals."""
import threading
import unittest

from approvals import (ApprovedPlan, NotInPlanError, PlanCancelledError, PlanNotApprovedError, PlanRejectedError,
                       PlanStillPendingError)

from .server import Fixture

fx = Fixture()
setUpModule = fx.start
tearDownModule = fx.stop


def steps(order):
    return [
        {"tool": "issue_refund", "payload": {"order_id": order, "line_id": 2, "amount": 12.5}},
        {"tool": "send_customer_email",
         "payload": {"customer_id": "c-" + order, "topic": "refund", "subject": "Your refund is on its way"}},
        {"tool": "invalidate_cache", "payload": {"key": "orders/" + order}, "intent_key": "cache:" + order},
    ]


def in_background(fn):
    out = {}

    def run():
        try:
            out["value"] = fn()
        except Exception as e:  # noqa: BLE001 - handed to the test
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()

    def join():
        t.join(60)
        if "error" in out:
            raise out["error"]
        return out["value"]

    return join


class PlanTest(unittest.TestCase):
    def test_three_steps_one_decision_each_performed_once(self):
        title = "Refund the duplicate charge on py-p1"
        proposing = in_background(lambda: fx.approvals.plan(steps("py-p1"), title=title, wait_for="30s"))
        pending = fx.server.pending_plan(title)
        self.assertEqual([s["decision"] for s in pending["steps"]], ["none", "human", "none"])
        fx.staff.decide_plan(pending["id"], "approve", "all three, once")
        plan = proposing()
        self.assertIsInstance(plan, ApprovedPlan)
        self.assertEqual(plan.id, pending["id"])
        self.assertEqual(plan.plan["state"], "approved")

        world = {"refunds": [], "emails": [], "cache": []}

        @plan.guard("issue_refund")
        def refund(p):
            world["refunds"].append(p)
            return {"refund_id": "re_%d" % len(world["refunds"])}

        @plan.guard("send_customer_email")
        def email(p):
            world["emails"].append(p)
            return {"message_id": "m_%d" % len(world["emails"])}

        @plan.guard("invalidate_cache", intent_key="cache:py-p1")
        def cache(p):
            world["cache"].append(p)
            return "invalidated"

        r, e, c = [s["payload"] for s in steps("py-p1")]
        # A step that differs in one field from what was approved: refused, nothing stored.
        with self.assertRaises(NotInPlanError) as cm:
            email(dict(e, subject="Sorry, and here is a coupon"))
        self.assertEqual(cm.exception.status, 422)
        self.assertIn("subject", cm.exception.detail)
        self.assertEqual(world["emails"], [])
        self.assertEqual(fx.approvals.find(intent_key="email:c-py-p1:refund")["actions"], [])

        self.assertEqual(refund(r), {"refund_id": "re_1"})
        self.assertEqual(email(e), {"message_id": "m_1"})
        self.assertEqual(cache(c), "invalidated")
        # Asking again replays the stored outcomes.
        self.assertEqual(refund(r), {"refund_id": "re_1"})
        self.assertEqual(email(e), {"message_id": "m_1"})
        self.assertEqual((len(world["refunds"]), len(world["emails"]), len(world["cache"])), (1, 1, 1))

        after = plan.refresh()
        self.assertEqual(after["state"], "done")
        self.assertEqual([s["state"] for s in after["steps"]], ["done", "done", "recorded"])
        for s in after["steps"]:
            self.assertEqual(fx.approvals.get(s["action_id"])["decided_by"], "plan:" + plan.id)
        self.assertEqual(fx.server.rest("/api/v1/actions?state=pending")["actions"], [])

    def test_rejected_plan(self):
        title = "Refund py-p2"
        proposing = in_background(lambda: fx.approvals.plan(steps("py-p2"), title=title, wait_for="30s"))
        pending = fx.server.pending_plan(title)
        fx.staff.decide_plan(pending["id"], "reject", "not this order")
        with self.assertRaises(PlanRejectedError) as cm:
            proposing()
        self.assertIsInstance(cm.exception, PlanNotApprovedError)
        self.assertEqual(cm.exception.plan["state"], "rejected")
        self.assertIn("not this order", str(cm.exception))
        performed = []

        @ApprovedPlan(fx.approvals, pending).guard("issue_refund")
        def refund(p):
            performed.append(p)

        with self.assertRaises(PlanNotApprovedError):
            refund(steps("py-p2")[0]["payload"])
        self.assertEqual(performed, [])

    def test_cancelled_and_still_pending(self):
        title = "Refund py-p3"
        proposing = in_background(lambda: fx.approvals.plan(steps("py-p3"), title=title, wait_for="30s"))
        fx.approvals.cancel_plan(fx.server.pending_plan(title)["id"])
        with self.assertRaises(PlanCancelledError):
            proposing()
        with self.assertRaises(PlanStillPendingError) as cm:
            fx.approvals.plan(steps("py-p4"), title="Refund py-p4", wait_for="1s")
        self.assertEqual(cm.exception.plan["state"], "pending")


if __name__ == "__main__":
    unittest.main()

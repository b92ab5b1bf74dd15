"""The refusal guidance is the server's words: REFUSAL_GUIDANCE is the table in
sdk/testdata/refusal-guidance.json (written by the server's test from its one
source, problem/guidance.go), and a real refusal's REST problem carries
the same sentence, naming the REST reads."""
import json
import os
import unittest

from approvals import IntentKeyReusedError, OutcomeConflictError
from approvals.errors import REFUSAL_GUIDANCE

from .server import REPO, Fixture

with open(os.path.join(REPO, "sdk", "testdata", "refusal-guidance.json"), encoding="utf-8") as _f:
    SERVER = json.load(_f)

fx = Fixture()
setUpModule = fx.start
tearDownModule = fx.stop


class GuidanceTest(unittest.TestCase):
    def test_the_sdk_guidance_is_the_servers(self):
        self.assertEqual(sorted(REFUSAL_GUIDANCE), sorted(SERVER))
        for code, faces in SERVER.items():
            self.assertEqual(REFUSAL_GUIDANCE[code], faces["sdk"], code)

    def test_a_real_refusal_carries_it(self):
        payload = {"order_id": "GD-py-1", "line_id": 1, "amount": 2}
        action = fx.approvals.submit("issue_refund", payload).action
        with self.assertRaises(IntentKeyReusedError) as cm:
            fx.approvals.submit("issue_refund", dict(payload, amount=3))
        e = cm.exception
        self.assertEqual(e.problem.get("guidance"), SERVER["intent_key_reused"]["rest"])
        self.assertEqual(e.guidance, SERVER["intent_key_reused"]["sdk"])
        self.assertTrue(str(e).endswith(SERVER["intent_key_reused"]["sdk"]), str(e))
        self.assertNotIn("nothing was done", e.detail.lower())
        fx.approvals.complete(action["id"], {"refund_id": "re_1"})
        with self.assertRaises(OutcomeConflictError) as cm:
            fx.approvals.fail(action["id"], "declined")
        self.assertEqual(cm.exception.problem.get("guidance"), SERVER["outcome_conflict"]["rest"])


if __name__ == "__main__":
    unittest.main()

"""The mapping of problem answers to typed errors, and the advice each refusal
an agent can meet carries (issue 43: every refusal says what happened and
what to do next). No server: some codes (intent_under_review, not_in_plan,
step_not_ready) are documented (docs/api.md) before the server sends them."""
import unittest

from approvals import (REFUSAL_GUIDANCE, ApprovalsError, InProgressError, IntentKeyReusedError,
                       IntentUnderReviewError, NotInPlanError, OutcomeConflictError, StepNotReadyError)
from approvals.errors import problem_error

ACTION = {"id": "a1", "intent_key": "refund:o1:1", "state": "done"}


class ErrorMappingTest(unittest.TestCase):
    def test_each_refusal_is_its_own_typed_error_with_advice(self):
        cases = [
            ("intent_key_reused", 422, IntentKeyReusedError, "do not call again with other arguments"),
            ("in_progress", 409, InProgressError, "do not perform the effect and do not call again"),
            ("intent_under_review", 409, IntentUnderReviewError,
             "do not call again for this intent until the ticket is resolved"),
            ("outcome_conflict", 409, OutcomeConflictError, "do not report again"),
            ("not_in_plan", 422, NotInPlanError, "exactly as the plan was approved"),
            ("step_not_ready", 409, StepNotReadyError, "perform the earlier steps first"),
        ]
        for code, status, cls, advice in cases:
            with self.subTest(code=code):
                e = problem_error({"status": status, "code": code, "detail": "refused (%s)" % code, "action": ACTION})
                self.assertIs(type(e), cls)
                self.assertEqual((e.code, e.status, e.action), (code, status, ACTION))
                self.assertEqual(e.guidance, REFUSAL_GUIDANCE[code])
                self.assertIn(advice, e.guidance)
                self.assertIn("refused (%s)" % code, str(e))
                self.assertTrue(str(e).endswith(e.guidance))
                # "Nothing was done" alone reads to a model as "the effect did not happen".
                self.assertNotIn("nothing was done", e.guidance.lower())

    def test_intent_key_reused_says_the_held_action_may_have_taken_effect(self):
        self.assertIn("may have happened", REFUSAL_GUIDANCE["intent_key_reused"])
        self.assertIn("find with its intent key", REFUSAL_GUIDANCE["intent_key_reused"])

    def test_other_codes_carry_no_advice_and_unknown_codes_are_plain(self):
        e = problem_error({"status": 404, "code": "not_found", "detail": "no action a9"})
        self.assertEqual(e.guidance, "")
        self.assertEqual(str(e), "approvals: not_found (404): no action a9")
        self.assertIs(type(problem_error({"status": 409, "code": "something_new"})), ApprovalsError)


if __name__ == "__main__":
    unittest.main()

"""The generated types match the server's OpenAPI document, and every
problem code it lists has its error class."""
import importlib.util
import os
import unittest

from approvals import errors
from approvals import _openapi

HERE = os.path.dirname(os.path.abspath(__file__))


def load_generator():
    spec = importlib.util.spec_from_file_location("openapi_types", os.path.join(HERE, "..", "scripts", "openapi_types.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class OpenAPITest(unittest.TestCase):
    def test_generated_module_is_fresh(self):
        gen = load_generator()
        self.assertEqual(gen.main(["--check"]), 0, "run python3 scripts/openapi_types.py in sdk/python and commit it")

    def test_every_problem_code_has_a_class(self):
        for code in _openapi.PROBLEM_CODES:
            cls = errors.ERROR_CLASSES[code]
            e = errors.problem_error({"status": 409, "code": code, "detail": "d"})
            self.assertIsInstance(e, cls)
            self.assertEqual(e.code, code)
        self.assertIs(type(errors.problem_error({"status": 418, "code": "teapot"})), errors.ApprovalsError)


if __name__ == "__main__":
    unittest.main()

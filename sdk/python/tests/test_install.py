"""The README's install commands on a clean copy: the SDK is built into a
wheel (``pip wheel``) and installed from it, and installed from its folder
(``pip install ./sdk/python``), each into an empty directory with
``--target`` and nothing from a package index; a fresh interpreter that
cannot see this checkout imports it from there and guards a call against a
real server."""
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from .server import Server

SDK = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

CHECK = r"""
import json, os, sys
import approvals
from approvals import Approvals, IntentKeyReusedError
assert not approvals.__file__.startswith(os.environ["SDK_CHECKOUT"]), approvals.__file__
client = Approvals(os.environ["APPROVALS_URL"], os.environ["APPROVALS_TOKEN"])
calls = []

@client.guard("issue_refund")
def issue_refund(order_id, line_id, amount):
    calls.append(order_id)
    return {"refund_id": "re_%d" % len(calls)}

first = issue_refund(order_id=os.environ["ORDER"], line_id=1, amount=2)
again = issue_refund(order_id=os.environ["ORDER"], line_id=1, amount=2)
try:
    issue_refund(order_id=os.environ["ORDER"], line_id=1, amount=3)
    refused = None
except IntentKeyReusedError as e:
    refused = e.code
print(json.dumps({"file": approvals.__file__, "first": first, "again": again, "calls": len(calls), "refused": refused}))
"""


def pip(*args):
    return subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args],
                          capture_output=True, text=True, timeout=120)


@unittest.skipIf(importlib.util.find_spec("pip") is None, "pip is not installed for this interpreter")
class InstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server()
        cls.tmp = tempfile.mkdtemp(prefix="approvals-py-install-")
        # A clean copy: the package and its build files, no tests, no caches.
        cls.copy = os.path.join(cls.tmp, "python")
        shutil.copytree(SDK, cls.copy, ignore=shutil.ignore_patterns("tests", "__pycache__", "*.egg-info", "build", "dist"))

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_check(self, target, order):
        env = dict(os.environ, PYTHONPATH=target, APPROVALS_URL=self.server.url, APPROVALS_TOKEN=self.server.token,
                   ORDER=order, SDK_CHECKOUT=SDK, NO_PROXY="127.0.0.1")
        out = subprocess.run([sys.executable, "-I", "-c", "import sys; sys.path.insert(0, %r)\n" % target + CHECK],
                             cwd=self.tmp, env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        got = json.loads(out.stdout)
        self.assertTrue(got["file"].startswith(target), got["file"])
        self.assertEqual(got["first"], {"refund_id": "re_1"})
        self.assertEqual(got["again"], {"refund_id": "re_1"}, "the same call replays")
        self.assertEqual(got["calls"], 1)
        self.assertEqual(got["refused"], "intent_key_reused")

    def test_wheel(self):
        wheels = os.path.join(self.tmp, "wheels")
        out = pip("wheel", "--no-index", "--no-deps", "-w", wheels, self.copy)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        [wheel] = glob.glob(os.path.join(wheels, "approvals-*-py3-none-any.whl"))
        target = os.path.join(self.tmp, "from-wheel")
        out = pip("install", "--no-index", "--no-deps", "--target", target, wheel)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertTrue(os.path.exists(os.path.join(target, "approvals", "py.typed")))
        self.run_check(target, "PI-wheel")

    def test_install_from_folder(self):
        target = os.path.join(self.tmp, "from-folder")
        out = pip("install", "--no-index", "--no-deps", "--target", target, self.copy)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.run_check(target, "PI-folder")


if __name__ == "__main__":
    unittest.main()

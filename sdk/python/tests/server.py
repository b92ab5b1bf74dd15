"""A real approvals server for the SDK's tests: the binary built from this
repository (APPROVALS_BIN, or ``go build`` here), on SQLite in a temporary
directory, on a port the kernel chose, with an agent token and a staff user;
a staff browser that decides through the dashboard's forms; and a proxy that
loses answers."""
import http.cookiejar
import json
import os
import re
import select
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PASSWORD = "a long test passphrase"

# The tools file of the tests, shared with the TypeScript SDK's.
with open(os.path.join(REPO, "sdk", "testdata", "tools.yaml"), encoding="utf-8") as _f:
    TOOLS = _f.read()

_built = None
# Tests talk to 127.0.0.1 only, whatever proxy the environment names.
_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def binary():
    global _built
    if os.environ.get("APPROVALS_BIN"):
        return os.environ["APPROVALS_BIN"]
    if _built is None:
        out = os.path.join(tempfile.mkdtemp(prefix="approvals-bin-"), "approvals")
        subprocess.run(["go", "build", "-o", out, "./cmd/approvals"], cwd=REPO, check=True)
        _built = out
    return _built


class Server:
    """One approvals process; stop() ends it and removes its directory. With a
    port it listens there, and halt() and resume() stop and start its process
    on the same address and database, as a failover would."""

    def __init__(self, tools=TOOLS, port=0, env=None):
        self.dir = tempfile.mkdtemp(prefix="approvals-py-")
        path = os.path.join(self.dir, "tools.yaml")
        with open(path, "w") as f:
            f.write(tools)
        self.env = dict(os.environ, DATABASE_URL="sqlite:" + os.path.join(self.dir, "approvals.db"),
                        APPROVALS_TOOLS=path, APPROVALS_ADDR="127.0.0.1:%d" % port, **(env or {}))
        self.port = port
        self.bin = binary()
        self.proc = subprocess.Popen([self.bin, "serve"], env=self.env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        # With no users the server logs its setup link, which carries its port.
        log, deadline = "", time.monotonic() + 30
        while True:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.proc.kill()
                raise RuntimeError("approvals did not start:\n" + log)
            ready, _, _ = select.select([self.proc.stderr], [], [], 0.5)
            if ready:
                log += self.proc.stderr.readline()
                m = re.search(r'url="?(http://127\.0\.0\.1:\d+)/setup', log)
                if m:
                    self.url = m.group(1)
                    break
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()  # keep the pipe drained
        self.token = self.cli("token", "create", "--name", "py-test")
        self.cli("user", "add", "--email", "ann@example.com", "--role", "approver", stdin=PASSWORD + "\n")

    def cli(self, *args, stdin=None):
        return subprocess.run([self.bin, *args], env=self.env, input=stdin, capture_output=True, text=True,
                              check=True).stdout.strip()

    def rest(self, path):
        req = urllib.request.Request(self.url + path, headers={"Authorization": "Bearer " + self.token})
        with _direct.open(req) as res:
            return json.loads(res.read())

    def pending(self, intent_key, timeout=20.0):
        """The pending action of an intent, once there is one."""
        deadline = time.monotonic() + timeout
        while True:
            q = urllib.parse.urlencode({"state": "pending", "intent_key": intent_key})
            actions = self.rest("/api/v1/actions?" + q)["actions"]
            if actions:
                return actions[0]
            if time.monotonic() > deadline:
                raise AssertionError("no pending action of %s within %ss" % (intent_key, timeout))
            time.sleep(0.05)

    def pending_plan(self, title, timeout=20.0):
        """The pending plan titled title, once there is one."""
        deadline = time.monotonic() + timeout
        while True:
            for p in self.rest("/api/v1/plans?state=pending")["plans"]:
                if p["title"] == title:
                    return p
            if time.monotonic() > deadline:
                raise AssertionError("no pending plan %r within %ss" % (title, timeout))
            time.sleep(0.05)

    def halt(self):
        self.halted = self.proc  # resume() does not wait for a process the test halted meanwhile
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        if self.proc.stderr:
            self.proc.stderr.close()

    def resume(self):
        """Starts the process again (same address, same database); returns once it answers."""
        if not self.port:
            raise RuntimeError("resume needs a server started with a port")
        proc = self.proc = subprocess.Popen([self.bin, "serve"], env=self.env, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                with _direct.open(self.url + "/api/v1/openapi.json", timeout=5):
                    return
            except OSError:
                if proc.poll() is not None and getattr(self, "halted", None) is proc:
                    # The test halted it again before this saw it answer (a
                    # caller's retry reached it first): nothing to wait for.
                    return
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("approvals did not start again (exit %s)" % proc.poll())
                time.sleep(0.05)

    def stop(self):
        self.halt()
        shutil.rmtree(self.dir, ignore_errors=True)


def free_port():
    """A TCP port free right now on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class Staff:
    """A staff member's browser: cookies, the CSRF token of each page, forms."""

    def __init__(self, url):
        self.url = url
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect(),
                                                  urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def request(self, method, path, form=None):
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        try:
            with self.opener.open(req) as res:
                return res.status, res.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def csrf(self, path):
        status, page = self.request("GET", path)
        m = re.search(r'<meta name="csrf-token" content="([^"]+)"', page)
        if not m:
            raise AssertionError("no csrf-token meta on %s (%d)" % (path, status))
        return m.group(1)

    def login(self, email="ann@example.com", password=PASSWORD):
        status, text = self.request("POST", "/login", {"email": email, "password": password, "_csrf": self.csrf("/login")})
        if status != 303:
            raise AssertionError("login answered %d: %s" % (status, text[:300]))
        return self

    def decide(self, id, decision, note=""):
        status, text = self.request("POST", "/actions/%s/%s" % (id, decision),
                                    {"_csrf": self.csrf("/actions/" + id), "note": note})
        if status != 303:
            raise AssertionError("%s %s answered %d: %s" % (decision, id, status, text[:300]))


    def decide_plan(self, id, decision, note=""):
        """Decides a plan on its page (/plans/{id}): approve, reject or request_changes."""
        status, text = self.request("POST", "/plans/%s/%s" % (id, decision),
                                    {"_csrf": self.csrf("/plans/" + id), "note": note})
        if status != 303:
            raise AssertionError("%s plan %s answered %d: %s" % (decision, id, status, text[:300]))


class LossyProxy:
    """A TCP proxy between the SDK and the server that can lose answers: while
    ``drop(request_line)`` holds, it forwards the request, lets the server
    answer (the server has acted), then closes the client's connection
    without passing the answer on."""

    def __init__(self, target):
        u = urllib.parse.urlparse(target)
        self.target = (u.hostname, u.port)
        self.drop = lambda line: False
        self.dropped = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        upstream = socket.create_connection(self.target)
        losing = False
        try:
            while True:
                ready, _, _ = select.select([client, upstream], [], [], 30)
                if not ready:
                    return
                if client in ready:
                    chunk = client.recv(65536)
                    if not chunk:
                        return
                    m = re.match(rb"[A-Z]+ \S+ HTTP/1\.1", chunk)
                    if m and not losing and self.drop(m.group(0).decode()):
                        losing = True
                        self.dropped.append(m.group(0).decode())
                    upstream.sendall(chunk)
                if upstream in ready:
                    chunk = upstream.recv(65536)
                    if not chunk or losing:
                        return  # the server answered: lose it
                    client.sendall(chunk)
        except OSError:
            return
        finally:
            client.close()
            upstream.close()

    def close(self):
        self.closed = True
        self.sock.close()


class Fixture:
    """The fixture of a test module: a server, a signed-in staff member and an
    SDK client. In the module: ``fx = Fixture()``, ``setUpModule = fx.start``,
    ``tearDownModule = fx.stop``."""

    def __init__(self, tools=None, env=None, **client_options):
        self.client_options = client_options
        self.tools = tools  # the tools file's text, or a function answering it at start
        self.env = env
        self.server = self.staff = self.approvals = None

    def start(self):
        from approvals import Approvals

        tools = self.tools() if callable(self.tools) else self.tools
        self.server = Server(tools or TOOLS, env=self.env)
        self.staff = Staff(self.server.url).login()
        self.approvals = Approvals(self.server.url, self.server.token, **self.client_options)

    def stop(self):
        if self.server:
            self.server.stop()

"""The client of the approvals agent REST API, over urllib."""
from __future__ import annotations

import http.client
import json
import random
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ._openapi import GET_ACTION_QUERY, LIST_ACTIONS_QUERY, Action, Plan
from .errors import (ApprovalsConnectionError, ApprovalsError, DryRunUnsupportedError, PlanNotApprovedError,
                     PlanStillPendingError, problem_error)

#: A wait: seconds, or a Go duration string such as "30s", "10m" or "1h30m".
Duration = Union[int, float, str]

#: The final states: a long-poll answers at once for these.
FINAL_STATES = frozenset(["done", "failed", "rejected", "changes_requested", "expired", "cancelled", "recorded"])

#: The plan states a long-poll answers at once for.
PLAN_FINAL_STATES = frozenset(["rejected", "changes_requested", "cancelled", "expired", "done"])

MAX_POLL = 60.0  # the API's longest ?wait

#: A W3C trace context: {"traceparent": ..., "tracestate": ...}.
TraceContext = Mapping[str, str]


def seconds(d: Duration) -> float:
    """Seconds of a Duration; a malformed one raises ValueError naming it."""
    if isinstance(d, (int, float)) and not isinstance(d, bool):
        if d < 0:
            raise ValueError("a wait must not be negative: %r" % d)
        return float(d)
    text = str(d).strip()
    if text == "0":
        return 0.0
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError('a wait such as "30s" or "10m", not %r' % text)
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


@dataclass(frozen=True)
class RetryPolicy:
    """How the calls that are safe to repeat are retried after a lost
    connection or a 429/5xx answer: for up to ``budget`` seconds from the first
    try, a long-poll's wait not counted (default 60, longer than a database failover: docs/operations.md, "Replication and failover"),
    with exponential backoff and full jitter, waiting at least Retry-After.
    Unbounded retries only move the failure from duplicates to overload."""

    budget: float = 60.0  # no retry starts, and no wait ends, later than this after the first try
    attempts: Optional[int] = None  # tries in all, the first included; None: as many as fit in the budget
    base_delay: float = 0.2
    max_delay: float = 5.0
    max_retry_after: float = 60.0  # a longer Retry-After is not waited for

    def delay(self, retry: int, retry_after: Optional[float] = None) -> float:
        jittered = random.random() * min(self.max_delay, self.base_delay * 2 ** (retry - 1))
        return jittered if retry_after is None else max(retry_after, jittered)

    def next_retry(self, retry: int, left: float, retry_after: Optional[float] = None) -> Optional[float]:
        """The wait before retry number ``retry`` (1 for the first) with ``left``
        seconds of the budget left, or None when there is to be no retry: the
        tries are spent, the server asks for a longer wait than the policy or
        the budget allows, or the budget is spent. A jittered backoff is cut
        to the budget's end; a Retry-After never is."""
        if self.attempts is not None and retry >= self.attempts:
            return None
        if left <= 0:
            return None
        if retry_after is not None and (retry_after > self.max_retry_after or retry_after > left):
            return None
        return min(left, self.delay(retry, retry_after))


NO_RETRY = RetryPolicy(attempts=1)

RETRYABLE_STATUS = frozenset([429, 500, 502, 503, 504])


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Submission:
    action: Action
    #: 201: a new action. For an exactly-once tool in_progress, you hold the claim.
    created: bool
    #: 200 with Idempotent-Replayed: the stored action of an earlier identical call.
    replayed: bool


class Approvals:
    """A client of approvals: ``Approvals(url, token)``."""

    def __init__(self, url: str, token: str, *, timeout: float = 30.0, retry: RetryPolicy = RetryPolicy(),
                 opener: Optional[urllib.request.OpenerDirector] = None,
                 trace_context: Optional[Callable[[], Optional[TraceContext]]] = None) -> None:
        """``trace_context``: a function answering the caller's current W3C
        trace context (``traceparent``, ``tracestate``), sent with every
        request, for callers without OpenTelemetry. Without it the active
        context is injected through ``opentelemetry.propagate`` when the
        ``opentelemetry`` package is importable."""
        if not url:
            raise ValueError("Approvals(url, token): url is required")
        if not token:
            raise ValueError("Approvals(url, token): token is required")
        self.url = url.rstrip("/")
        self._token = token
        self._timeout = timeout
        self._retry = retry
        # No proxies from the environment and no redirects followed: the
        # API never redirects, and a token must not travel elsewhere.
        self._opener = opener or urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
        self._dry_run_offered: Optional[bool] = None
        self._trace_context = trace_context

    # -- calls --------------------------------------------------------------

    def submit(self, tool: str, payload: Mapping[str, Any], *, intent_key: Optional[str] = None,
               plan: Optional[str] = None) -> Submission:
        """Submits a call of tool (POST /api/v1/actions); a repeat of the same
        call replays. ``plan``: the id of an approved plan the call is a step of."""
        body: Dict[str, Any] = {"tool": tool, "payload": dict(payload)}
        if intent_key is not None:
            body["intent_key"] = intent_key
        if plan is not None:
            body["plan"] = plan
        status, headers, action = self._call("POST", "/api/v1/actions", body=body, safe=True)
        return Submission(action=action, created=status == 201, replayed=headers.get("Idempotent-Replayed") == "true")

    def get(self, id: str, *, wait: Optional[Duration] = None, state: Optional[str] = None) -> Action:
        """Reads an action. With ``wait`` it long-polls until the state differs
        from ``state`` (default: the state now), the action is final, or the
        wait ends, and returns the action as it is then."""
        path = "/api/v1/actions/" + urllib.parse.quote(id, safe="")
        if wait is None:
            return self._call("GET", path, safe=True)[2]
        total = seconds(wait)
        deadline = time.monotonic() + total
        until = state
        if until is None and total > MAX_POLL:
            # Several polls must all wait on the state at the start.
            a = self._call("GET", path, safe=True)[2]
            if a["state"] in FINAL_STATES:
                return a
            until = a["state"]
        while True:
            remaining = max(0.0, min(MAX_POLL, deadline - time.monotonic()))
            query: Dict[str, Any] = {"wait": "%dms" % int(remaining * 1000)}
            if until is not None:
                query["state"] = until
            a = self._call("GET", path, query=_checked(query, GET_ACTION_QUERY), safe=True, extra=remaining)[2]
            if until is None or a["state"] != until or a["state"] in FINAL_STATES or time.monotonic() >= deadline:
                return a

    def find(self, *, intent_key: Optional[str] = None, state: Optional[str] = None, tool: Optional[str] = None,
             limit: Optional[int] = None, cursor: Optional[str] = None) -> Dict[str, Any]:
        """Lists actions, newest first: every attempt of an intent with intent_key=."""
        query = {"intent_key": intent_key, "state": state, "tool": tool, "limit": limit, "cursor": cursor}
        return self._call("GET", "/api/v1/actions", query=_checked(query, LIST_ACTIONS_QUERY), safe=True)[2]

    def tools(self) -> Dict[str, Any]:
        """The registry: each tool's class, template and the guidance agents should follow."""
        return self._call("GET", "/api/v1/tools", safe=True)[2]

    def dry_run(self, tool: str, payload: Mapping[str, Any], *, intent_key: Optional[str] = None) -> Dict[str, Any]:
        """What a submission would do, without doing it (POST
        /api/v1/actions?dry_run=true): ``{"outcome": ..., "action": ...}``. A
        server whose OpenAPI document does not offer dry_run is never sent one:
        an older server could take it for a real submission."""
        if not self._offers_dry_run():
            raise DryRunUnsupportedError(
                "approvals: the server at %s does not offer dry runs (POST /api/v1/actions?dry_run=true); "
                "nothing was sent" % self.url)
        body: Dict[str, Any] = {"tool": tool, "payload": dict(payload)}
        if intent_key is not None:
            body["intent_key"] = intent_key
        status, _, answer = self._call("POST", "/api/v1/actions", query={"dry_run": "true"}, body=body, safe=True)
        if status != 200 or not isinstance(answer, dict) or not isinstance(answer.get("outcome"), str):
            raise ApprovalsError({"status": status, "code": "unexpected_answer",
                                  "detail": "a dry run answered %d without an outcome; the server may have taken it "
                                            "for a submission" % status})
        return answer

    def _offers_dry_run(self) -> bool:
        if self._dry_run_offered is None:
            doc = self._call("GET", "/api/v1/openapi.json", safe=True, auth=False)[2]
            params = (((doc.get("paths") or {}).get("/api/v1/actions") or {}).get("post") or {}).get("parameters") or []
            self._dry_run_offered = any(p.get("name") == "dry_run" and p.get("in") == "query" for p in params)
        return self._dry_run_offered

    def execute(self, id: str) -> Action:
        """Claims an approved at-most-once action for execution. Never repeated by
        the SDK: a second execute answers 409 in_progress, never permission."""
        return self._call("POST", self._path(id, "execute"), safe=False)[2]

    def complete(self, id: str, result: Any) -> Action:
        """Reports the effect's result (in_progress → done); a repeat with the same result replays."""
        return self._call("POST", self._path(id, "complete"), body={"result": result}, safe=True)[2]

    def fail(self, id: str, error: str) -> Action:
        """Reports that the effect definitely did not happen; releases the intent."""
        return self._call("POST", self._path(id, "fail"), body={"error": error}, safe=True)[2]

    def verify(self, id: str, *, once: bool = False) -> Dict[str, Any]:
        """Asks the tool's verifier whether the effect of your in_progress
        action happened: ``{"verdict", "reason", "checked_at", "action"}``.
        ``once``: one try, no retry of a lost answer or of a 429
        too_many_checks (the guard's own ask)."""
        return self._call("POST", self._path(id, "verify"), safe=not once)[2]

    # -- plans --------------------------------------------------------------

    def plan(self, steps: Sequence[Mapping[str, Any]], *, title: Optional[str] = None, ordered: Optional[bool] = None,
             expires_after: Optional[Duration] = None, wait_for: Duration = "10m") -> "ApprovedPlan":
        """Proposes a plan (POST /api/v1/plans), waits up to ``wait_for`` for a
        person's decision and returns the approved plan, whose guarded calls
        carry its id. Each step is ``{"tool", "payload", "intent_key"?}``. A
        plan rejected, sent back for changes, cancelled or expired raises
        PlanRejectedError, PlanChangesRequestedError, PlanCancelledError or
        PlanExpiredError (all PlanNotApprovedError); one still pending after
        ``wait_for`` raises PlanStillPendingError (it stays pending)."""
        p = self.propose_plan(steps, title=title, ordered=ordered, expires_after=expires_after)
        wait = seconds(wait_for)
        if p["state"] == "pending":
            p = self.get_plan(p["id"], wait=wait, state="pending")
        if p["state"] in ("approved", "done"):
            return ApprovedPlan(self, p)
        if p["state"] == "pending":
            raise PlanStillPendingError(p, wait)
        raise PlanNotApprovedError.of(p)

    def propose_plan(self, steps: Sequence[Mapping[str, Any]], *, title: Optional[str] = None,
                     ordered: Optional[bool] = None, expires_after: Optional[Duration] = None) -> Plan:
        """Proposes a plan and returns it as stored (201), without waiting: plan() waits too."""
        if not steps:
            raise ValueError("approvals.plan(steps): steps must be a non-empty list")
        body: Dict[str, Any] = {
            "title": title if title is not None else "%d steps: %s" % (len(steps), ", ".join(s["tool"] for s in steps)),
            "steps": [dict({"tool": s["tool"], "payload": dict(s["payload"])},
                           **({"intent_key": s["intent_key"]} if s.get("intent_key") is not None else {}))
                      for s in steps],
        }
        if ordered is not None:
            body["ordered"] = ordered
        if expires_after is not None:
            body["expires_after"] = "%dms" % int(seconds(expires_after) * 1000)
        # Never repeated: a second proposal would be a second plan for a person to decide.
        return self._call("POST", "/api/v1/plans", body=body, safe=False)[2]

    def get_plan(self, id: str, *, wait: Optional[Duration] = None, state: Optional[str] = None) -> Plan:
        """Reads a plan; with ``wait`` it long-polls as get() does for an action."""
        path = "/api/v1/plans/" + urllib.parse.quote(id, safe="")
        if wait is None:
            return self._call("GET", path, safe=True)[2]
        deadline = time.monotonic() + seconds(wait)
        until = state
        if until is None:
            p = self._call("GET", path, safe=True)[2]
            if p["state"] in PLAN_FINAL_STATES:
                return p
            until = p["state"]
        while True:
            remaining = max(0.0, min(MAX_POLL, deadline - time.monotonic()))
            query = {"wait": "%dms" % int(remaining * 1000), "state": until}
            p = self._call("GET", path, query=query, safe=True, extra=remaining)[2]
            if p["state"] != until or p["state"] in PLAN_FINAL_STATES or time.monotonic() >= deadline:
                return p

    def cancel_plan(self, id: str) -> Plan:
        """Withdraws a plan while none of its steps has been submitted."""
        return self._call("POST", "/api/v1/plans/%s/cancel" % urllib.parse.quote(id, safe=""), safe=True)[2]

    def cancel(self, id: str) -> Action:
        """Withdraws a pending or approved action before execution."""
        return self._call("POST", self._path(id, "cancel"), safe=True)[2]

    def guard(self, tool: str, *, wait_for: Duration = "10m",
              intent_key: Union[None, str, Callable[[Dict[str, Any]], str]] = None, plan: Optional[str] = None,
              verify: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """``@approvals.guard("issue_refund")``: see approvals.guard.guard."""
        from .guard import guard

        return guard(self, tool, wait_for=wait_for, intent_key=intent_key, plan=plan, verify=verify)

    # -- transport ----------------------------------------------------------

    def _trace_headers(self, headers: Dict[str, str]) -> None:
        """The caller's trace context: the trace_context option's, else
        OpenTelemetry's active one when it is importable."""
        if self._trace_context is not None:
            try:
                carrier: Mapping[str, str] = self._trace_context() or {}
            except Exception:  # noqa: BLE001 - a broken trace context never fails the call
                return
        else:
            inject = _otel_inject()
            if inject is None:
                return
            carrier = {}
            try:
                inject(carrier)
            except Exception:  # noqa: BLE001 - a broken propagator never fails the call
                return
        traceparent = carrier.get("traceparent")
        if traceparent:
            headers["traceparent"] = traceparent
            if carrier.get("tracestate"):
                headers["tracestate"] = carrier["tracestate"]

    @staticmethod
    def _path(id: str, verb: str) -> str:
        return "/api/v1/actions/%s/%s" % (urllib.parse.quote(id, safe=""), verb)

    def _call(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None, body: Any = None,
              safe: bool, extra: float = 0.0, auth: bool = True) -> Tuple[int, Any, Any]:
        url = self.url + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode("utf-8")
        headers = {"Accept": "application/json, application/problem+json", "User-Agent": "approvals-python"}
        if auth:
            headers["Authorization"] = "Bearer " + self._token
        if data is not None:
            headers["Content-Type"] = "application/json"
        self._trace_headers(headers)
        policy = self._retry if safe else NO_RETRY
        started = time.monotonic()
        # The budget counts from the first try; a long-poll's wait is not part
        # of it: it counts from the first failure, or from the wait's end when
        # the answer came later, so that a read that meets the failover at the
        # end of a minute's wait is retried as long as any other.
        budget_from = [started]

        def left() -> float:
            if attempt == 1 and extra:
                budget_from[0] = min(time.monotonic(), started + extra)
            return budget_from[0] + policy.budget - time.monotonic()

        attempt = 0
        while True:
            attempt += 1
            req = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with self._opener.open(req, timeout=self._timeout + extra) as res:
                    return res.status, res.headers, _json(res.read())
            except urllib.error.HTTPError as e:
                try:
                    text = e.read()
                except (http.client.HTTPException, socket.timeout, OSError) as cut:
                    lost: BaseException = cut  # the answer never arrived whole: a lost answer
                else:
                    if e.code in RETRYABLE_STATUS:
                        wait = policy.next_retry(attempt, left(), parse_retry_after(e.headers.get("Retry-After")))
                        if wait is not None:
                            time.sleep(wait)
                            continue
                    raise problem_error(_problem(e.code, text)) from None
            except (urllib.error.URLError, http.client.HTTPException, socket.timeout, OSError) as e:
                lost = e
            wait = policy.next_retry(attempt, left())
            if wait is not None:
                time.sleep(wait)
                continue
            raise ApprovalsConnectionError("approvals: %s %s got no answer from %s%s: %s" % (
                method, path, self.url,
                " after %d tries in %ds" % (attempt, round(time.monotonic() - started)) if attempt > 1 else "",
                lost)) from lost


class ApprovedPlan:
    """An approved plan (Approvals.plan): its guarded calls and submissions
    carry its id, so that each step equal to one the person approved goes
    through once; a call that differs from every unused step is refused
    (NotInPlanError) and nothing is stored."""

    def __init__(self, client: Approvals, plan: Plan) -> None:
        self.client = client
        #: The plan as it was approved.
        self.plan = plan
        self.id: str = plan["id"]

    @property
    def steps(self) -> List[Dict[str, Any]]:
        return list(self.plan["steps"])

    def guard(self, tool: str, *, wait_for: Duration = "10m",
              intent_key: Union[None, str, Callable[[Dict[str, Any]], str]] = None,
              verify: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """``@plan.guard("issue_refund")``: Approvals.guard, each call a step of this plan."""
        return self.client.guard(tool, wait_for=wait_for, intent_key=intent_key, plan=self.id, verify=verify)

    def submit(self, tool: str, payload: Mapping[str, Any], *, intent_key: Optional[str] = None) -> Submission:
        """Approvals.submit, as a step of this plan."""
        return self.client.submit(tool, payload, intent_key=intent_key, plan=self.id)

    def refresh(self, *, wait: Optional[Duration] = None, state: Optional[str] = None) -> Plan:
        """The plan as it is now (each step's action_id and state once submitted)."""
        return self.client.get_plan(self.id, wait=wait, state=state)


_otel: Any = False  # not looked for yet


def _otel_inject() -> Optional[Callable[[Dict[str, str]], None]]:
    """opentelemetry.propagate.inject when the opentelemetry package is importable (looked for once), else None."""
    global _otel
    if _otel is False:
        try:
            from opentelemetry import propagate  # type: ignore[import-not-found]

            _otel = propagate.inject
        except Exception:  # noqa: BLE001 - not installed, or broken: send no context
            _otel = None
    return _otel


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        return None


def _checked(query: Dict[str, Any], documented: Tuple[str, ...]) -> Dict[str, Any]:
    # The generated names from the OpenAPI document: a parameter the API no
    # longer documents fails here rather than being silently ignored.
    unknown = set(query) - set(documented)
    if unknown:
        raise AssertionError("approvals: query parameters %s are not in the OpenAPI document" % sorted(unknown))
    return query


def _json(raw: bytes) -> Any:
    return json.loads(raw.decode("utf-8")) if raw else None


def _problem(status: int, raw: bytes) -> Dict[str, Any]:
    try:
        p = json.loads(raw.decode("utf-8"))
        if isinstance(p, dict) and isinstance(p.get("code"), str):
            p["status"] = status
            return p
    except ValueError:
        pass
    return {"status": status, "code": "http_%d" % status, "detail": raw.decode("utf-8", "replace")[:500]}

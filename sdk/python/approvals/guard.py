"""``@approvals.guard("tool")``: the function that performs a tool's effect,
wrapped in the protocol (the README's "From your agent")."""
from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Union

from ._openapi import Action
from .client import Duration, seconds
from .errors import (ChangesRequestedError, InProgressError, NotApprovedError, NotPerformedError,
                     OutcomeConflictError, OutcomeUnknownError, RejectedError, StillPendingError)

if TYPE_CHECKING:  # pragma: no cover
    from .client import Approvals


def guard(client: "Approvals", tool: str, *, wait_for: Duration = "10m",
          intent_key: Union[None, str, Callable[[Dict[str, Any]], str]] = None, plan: Optional[str] = None,
          verify: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorates the function that performs tool's effect. Call the result with
    the payload as one dict, or as keyword arguments; the function is called
    the same way, with what was approved:

    - a claim (201 in_progress): the function runs once, then ``complete``;
    - a replay: the stored result; in_progress: InProgressError, never a call;
    - pending: wait up to ``wait_for`` for the decision; approved: ``execute``,
      then the function once with the approved payload; rejected or
      changes_requested: RejectedError / ChangesRequestedError with the note;
    - the function raises NotPerformedError: ``fail`` is reported and it is
      re-raised; anything else: nothing is reported, and the tool's verifier
      is asked once (POST .../verify, unless ``verify=False``): a proven
      ``done`` that approvals stored returns the stored result (the provider's
      record); any other verdict, no verifier or too many checks raises
      OutcomeUnknownError with ``check`` set;
    - the function returned: only ``complete`` is reported, never ``fail``; a
      complete that meets another stored outcome raises OutcomeConflictError
      with ``performed = True`` and the result.

    ``plan``: the id of an approved plan each call is a step of (ApprovedPlan.guard sets it).
    """
    wait = seconds(wait_for)

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
            # Called here, it would return its coroutine unrun: the claim
            # taken, the effect never made, and the outcome reported unknown.
            raise TypeError("approvals.guard: %s is an async function; the guard is synchronous and calls the "
                            "function itself: guard a synchronous function (run the async effect inside it with "
                            "asyncio.run)" % getattr(fn, "__name__", repr(fn)))

        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if args and (len(args) != 1 or kwargs or not isinstance(args[0], dict)):
                raise TypeError("call %s with the payload as one dict or as keyword arguments" % fn.__name__)
            as_dict = bool(args)
            payload: Dict[str, Any] = dict(args[0]) if as_dict else dict(kwargs)

            def call(p: Dict[str, Any]) -> Any:
                return fn(p) if as_dict else fn(**p)

            key = intent_key(payload) if callable(intent_key) else intent_key
            sub = client.submit(tool, payload, intent_key=key, plan=plan)
            a = sub.action
            state = a["state"]
            if state == "recorded":
                return call(payload)  # at-least-once: repeating it is harmless
            if state == "in_progress":
                if sub.created:
                    return _perform(client, a, payload, call, verify)
                raise _in_progress(a)
            if state == "done":
                return a.get("result")
            if state == "pending":
                a = client.get(a["id"], wait=wait, state="pending")
            elif state != "approved":
                raise _not_approved(a)
            state = a["state"]
            if state == "approved":
                claimed = client.execute(a["id"])
                approved = claimed.get("approved_payload")
                return _perform(client, claimed, claimed["payload"] if approved is None else approved, call, verify)
            if state == "done":
                return a.get("result")  # executed elsewhere (a webhook executor)
            if state == "pending":
                raise StillPendingError(a, wait)
            if state == "in_progress":
                raise _in_progress(a)
            raise _not_approved(a)

        return guarded

    return decorate


def _perform(client: "Approvals", claimed: Action, payload: Dict[str, Any], call: Callable[[Dict[str, Any]], Any],
             verify: bool) -> Any:
    try:
        result = call(payload)
    except NotPerformedError as e:
        # The one report that releases the intent: only for a definite non-effect.
        try:
            client.fail(claimed["id"], str(e) or "not performed")
        except Exception:  # noqa: BLE001 - an unreported fail leaves it for an operator
            pass
        raise
    except Exception as e:  # noqa: BLE001 - any other failure may follow the effect
        return _settle(client, OutcomeUnknownError(claimed, e, client=client), verify)
    try:
        client.complete(claimed["id"], result)
    except OutcomeConflictError as e:
        # The function ran and returned: the effect happened, whatever the
        # report meets. Never report fail from here; say performed, with the result.
        raise OutcomeConflictError.after_performed(e, result) from e
    except Exception as e:  # noqa: BLE001
        return _settle(client, OutcomeUnknownError(claimed, e, performed=True, result=result, client=client), verify)
    return result


def _settle(client: "Approvals", unknown: OutcomeUnknownError, verify: bool) -> Any:
    """After an unknown outcome: ask the system of record once (never perform
    again). A proof of ``done`` that approvals stored is the result; anything
    else leaves the action to reconciliation and raises the unknown outcome."""
    if verify:
        try:
            check = client.verify(unknown.action["id"], once=True)
            unknown.check = check
            if check.get("verdict") == "done":
                a = check.get("action") or client.get(unknown.action["id"])
                if a.get("state") == "done":
                    return a.get("result")
        except Exception as e:  # noqa: BLE001 - no verifier, too many checks, no answer: the outcome stays unknown
            if unknown.check is None:
                unknown.check = e
    raise unknown from unknown.cause


def _in_progress(a: Action) -> InProgressError:
    return InProgressError({"status": 409, "code": "in_progress", "action": a,
                            "detail": "action %s for intent %r is being performed: do not act; read it later" % (
                                a["id"], a["intent_key"])})


def _not_approved(a: Action) -> NotApprovedError:
    if a["state"] == "rejected":
        return RejectedError(a)
    if a["state"] == "changes_requested":
        return ChangesRequestedError(a)
    return NotApprovedError(a)


__all__ = ["guard"]

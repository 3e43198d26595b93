"""``/admin``: a small server-rendered page for whoever holds the admin token.

Signing in trades the token for a server-side session: a random id in an HttpOnly,
SameSite=Strict cookie, its hash in Redis (expiring with the session, deleted at sign-out), so
the token itself is never stored in the browser and every sign-in gets its own session. Every
form carries a CSRF token derived from the session. The page acts through the same services
as the memory API, as actor ``admin``, so the write gate, history and verified deletes are
the same. No JavaScript and no build step:
destructive bulk actions get a confirmation page instead of a script dialog.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

from litestar import Request, Response, Router, get, post
from litestar.datastructures import Cookie, State
from litestar.response import Redirect, Template

from . import identity as identity_mod
from .access import check_admin_token
from .admin_text import LANGS, TEXT, pick_lang
from .clock import from_iso, to_iso
from .errors import BadRequest, MemgateError, TooManyAttempts, Unauthorized
from .identity import Identity

SESSION_COOKIE = "memgate_admin"
LANG_COOKIE = "memgate_lang"
SESSION_SECONDS = 12 * 3600
_CONFIRM = "yes"
# The page needs no script, frame or outside resource: say so, and keep it out of caches.
_SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}

# Notices shown after a redirect (?done=<key>); the text lives in admin_text.
_DONE = {
    "saved",
    "deleted",
    "deleted_project",
    "deleted_all",
    "paused",
    "resumed",
    "confirmed",
    "rejected",
}


def _sign(token: str, message: str) -> str:
    return hmac.new(token.encode(), message.encode(), hashlib.sha256).hexdigest()


def _digest(session: str) -> str:
    return hashlib.sha256(session.encode()).hexdigest()


async def _session(request: Request[Any, Any, State]) -> str | None:
    """The live session of this request's cookie, or None (no token configured, no cookie,
    unknown, expired or signed out). Remembered on the request for the page it renders."""
    state = request.app.state
    value = request.cookies.get(SESSION_COOKIE, "")
    found = None
    if state.settings.admin_token and 0 < len(value) <= 128:
        if await state.store.admin_session_exists(_digest(value)):
            found = value
    request.state.admin_session = found
    return found


def _csrf(request: Request[Any, Any, State], session: str) -> str:
    return _sign(request.app.state.settings.admin_token, "csrf:" + session)


def _lang(request: Request[Any, Any, State]) -> str:
    asked = request.query_params.get("lang")
    if asked in LANGS:
        return str(asked)
    return pick_lang(request.cookies.get(LANG_COOKIE), request.headers.get("accept-language"))


def _page(
    request: Request[Any, Any, State], name: str, status: int = 200, **context: Any
) -> Template:
    lang = _lang(request)
    session: str | None = getattr(request.state, "admin_session", None)
    template = Template(
        template_name=f"admin/{name}.html",
        context={
            "t": TEXT[lang],
            "lang": lang,
            "path": request.url.path,
            "signed_in": session is not None,
            "csrf": _csrf(request, session) if session else "",
            "fmt": _fmt,
            **context,
        },
        status_code=status,
        media_type="text/html",
        headers=_SECURITY_HEADERS,
    )
    if request.query_params.get("lang") in LANGS:
        template.cookies.append(
            Cookie(
                key=LANG_COOKIE, value=lang, path="/admin", samesite="strict", max_age=365 * 86400
            )
        )
    return template


def _fmt(value: Any) -> str:
    """Dates as YYYY-MM-DD HH:MM UTC: readable, still unambiguous."""
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    if isinstance(value, str) and len(value) >= 16 and value[4] == "-" and "T" in value:
        return value[:16].replace("T", " ")
    return "" if value is None else str(value)


def _user_url(ident: Identity, done: str | None = None) -> str:
    url = f"/admin/users/{quote(ident.tenant)}/{quote(ident.user)}"
    return f"{url}?done={done}" if done else url


async def _form(request: Request[Any, Any, State]) -> dict[str, str]:
    """The posted form, after checking the session and its CSRF token."""
    session = await _session(request)
    if session is None:
        raise Unauthorized("Sign in to the admin page again.", code="admin_signed_out")
    form = await request.form()
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    if not hmac.compare_digest(values.get("csrf", ""), _csrf(request, session)):
        raise BadRequest("The form expired; reload the page and try again.", code="csrf")
    return values


def _memgate_error(request: Request[Any, Any, State], exc: Exception) -> Response[Any]:
    assert isinstance(exc, MemgateError)
    if isinstance(exc, Unauthorized):
        return Redirect("/admin", status_code=303)
    back = urlsplit(request.headers.get("referer", "")).path
    return _page(
        request,
        "error",
        status=exc.status_code,
        message=exc.message,
        back=back if back.startswith("/admin") else "/admin",
    )


# -- sign in ---------------------------------------------------------------------------------


@get("/")
async def home(
    request: Request[Any, Any, State], state: State, tenant: str | None = None
) -> Template:
    if await _session(request) is None:
        return _page(request, "login", configured=bool(state.settings.admin_token))
    owners = await state.memories.owners()
    if tenant:
        owners = [o for o in owners if o["tenant"] == tenant]
    return _page(request, "home", owners=owners, tenant=tenant or "")


@post("/login", status_code=303)
async def login(request: Request[Any, Any, State], state: State) -> Response[Any]:
    token = state.settings.admin_token
    given = (await request.form()).get("token", "")
    try:
        check_admin_token(request, given if isinstance(given, str) else None)
    except TooManyAttempts as exc:
        wait = exc.extra["retry_after"]
        return _page(request, "login", status=429, configured=bool(token), locked=wait)
    except Unauthorized:
        return _page(request, "login", status=401, configured=bool(token), failed=True)
    value = secrets.token_urlsafe(32)
    await state.store.put_admin_session(_digest(value), SESSION_SECONDS)
    return Redirect(
        "/admin",
        status_code=303,
        cookies=[
            Cookie(
                key=SESSION_COOKIE,
                value=value,
                path="/admin",
                httponly=True,
                samesite="strict",
                max_age=SESSION_SECONDS,
                secure=request.url.scheme == "https",
            ),
        ],
    )


@post("/logout", status_code=303)
async def logout(request: Request[Any, Any, State], state: State) -> Response[Any]:
    await _form(request)
    await state.store.delete_admin_session(_digest(request.cookies[SESSION_COOKIE]))
    return Redirect(
        "/admin",
        status_code=303,
        cookies=[
            Cookie(
                key=SESSION_COOKIE,
                value="",
                path="/admin",
                max_age=0,
                httponly=True,
                samesite="strict",
            ),
        ],
    )


# -- one user --------------------------------------------------------------------------------

_USER = "/users/{tenant:str}/{user:str}"


async def _signed_in_as(request: Request[Any, Any, State], tenant: str, user: str) -> Identity:
    if await _session(request) is None:
        raise Unauthorized("Sign in to the admin page.", code="admin_signed_out")
    return identity_mod.for_admin(tenant, user)


@get(_USER)
async def user_page(
    request: Request[Any, Any, State],
    state: State,
    tenant: str,
    user: str,
    status: str | None = None,
    project_id: str | None = None,
    done: str | None = None,
) -> Template:
    ident = await _signed_in_as(request, tenant, user)
    everything = await state.memories.list(ident)
    shown = [
        m
        for m in everything
        if (not status or m.status == status) and (not project_id or m.project_id == project_id)
    ]
    return _page(
        request,
        "user",
        ident=ident,
        memories=shown,
        total=len(everything),
        projects=sorted({m.project_id for m in everything if m.project_id}),
        statuses=sorted({m.status for m in everything}),
        status_filter=status or "",
        project_filter=project_id or "",
        candidates=await state.candidates.list(ident),
        paused=await state.store.is_recall_paused(ident.tenant, ident.user),
        traces=await state.store.recent_traces(ident.tenant, ident.user),
        types=sorted(state.policy.types),
        done=done if done in _DONE else None,
        now=to_iso(state.clock.now()),
    )


@get(_USER + "/memories/{memory_id:str}")
async def memory_page(
    request: Request[Any, Any, State], state: State, tenant: str, user: str, memory_id: str
) -> Template:
    ident = await _signed_in_as(request, tenant, user)
    memory = await state.memories.get(ident, memory_id)
    history = await state.store.history(ident.tenant, ident.user, memory_id)
    return _page(
        request, "memory", ident=ident, m=memory, history=history, types=sorted(state.policy.types)
    )


@get(_USER + "/traces/{trace_id:str}")
async def trace_page(
    request: Request[Any, Any, State], state: State, tenant: str, user: str, trace_id: str
) -> Template:
    ident = await _signed_in_as(request, tenant, user)
    trace = await state.store.get_trace(ident.tenant, ident.user, trace_id)
    if trace is None:
        return _page(
            request,
            "error",
            status=404,
            back=_user_url(ident),
            message=TEXT[_lang(request)]["trace_gone"],
        )
    ids = [cand["id"] for cand in trace.get("candidates") or []]
    found = await state.store.load_memories(
        [state.store.memory_key(ident.tenant, ident.user, i) for i in ids]
    )
    by_id = {memory.id: memory.content for memory in found.values()}
    contents = {i: by_id.get(i, "") for i in ids}
    return _page(request, "trace", ident=ident, trace=trace, contents=contents)


@post(_USER + "/memories/{memory_id:str}/edit", status_code=303)
async def edit_memory(
    request: Request[Any, Any, State], state: State, tenant: str, user: str, memory_id: str
) -> Response[Any]:
    ident = await _signed_in_as(request, tenant, user)
    form = await _form(request)
    memory = await state.memories.get(ident, memory_id)
    changes: dict[str, Any] = {}
    if form.get("content", "").strip() and form["content"].strip() != memory.content:
        changes["content"] = form["content"].strip()
    if form.get("type") and form["type"] != memory.type:
        changes["type"] = form["type"]
    if form.get("applies") and form["applies"] != memory.applies:
        changes["applies"] = form["applies"]
    if "expires_on" in form:
        changes.update(_expiry_change(form["expires_on"], memory.expires_at))
    if changes:
        await state.memories.update(ident, memory_id, changes, actor="admin")
    return Redirect(_user_url(ident, "saved"), status_code=303)


def _expiry_change(day: str, current: datetime | None) -> dict[str, Any]:
    """A date input: empty clears the expiry, a day means the end of that day (UTC)."""
    shown = current.strftime("%Y-%m-%d") if current else ""
    if day == shown:
        return {}
    if not day:
        return {"expires_at": None}
    try:
        when = from_iso(f"{day}T23:59:59Z")
    except ValueError:
        raise BadRequest("The expiry must be a date (YYYY-MM-DD).", param="expires_on") from None
    return {"expires_at": to_iso(when)}


@post(_USER + "/memories/{memory_id:str}/delete", status_code=303)
async def delete_memory(
    request: Request[Any, Any, State], state: State, tenant: str, user: str, memory_id: str
) -> Response[Any]:
    ident = await _signed_in_as(request, tenant, user)
    await _form(request)
    await state.memories.delete(ident, memory_id, actor="admin")
    return Redirect(_user_url(ident, "deleted"), status_code=303)


@post(_USER + "/delete", status_code=303)
async def delete_many(
    request: Request[Any, Any, State], state: State, tenant: str, user: str
) -> Response[Any]:
    """Delete a project's memories, or all of them: the first post asks for confirmation."""
    ident = await _signed_in_as(request, tenant, user)
    form = await _form(request)
    everything = form.get("all") == "true"
    project = None if everything else form.get("project_id", "")
    if project is not None:
        identity_mod.check_project_id(project, param="project_id")
    if form.get("confirm") != _CONFIRM:
        affected = await state.memories.list(ident, project_id=project)
        return _page(
            request,
            "confirm",
            status=200,
            ident=ident,
            project_id=project,
            everything=everything,
            count=len(affected),
        )
    await state.memories.delete_where(
        ident, project_id=project, everything=everything, actor="admin"
    )
    await state.candidates.forget(ident, project_id=project)
    return Redirect(
        _user_url(ident, "deleted_all" if everything else "deleted_project"), status_code=303
    )


@post(_USER + "/recall", status_code=303)
async def set_recall(
    request: Request[Any, Any, State], state: State, tenant: str, user: str
) -> Response[Any]:
    ident = await _signed_in_as(request, tenant, user)
    paused = (await _form(request)).get("paused") == "true"
    await state.store.set_recall_paused(ident.tenant, ident.user, paused)
    return Redirect(_user_url(ident, "paused" if paused else "resumed"), status_code=303)


@post(_USER + "/candidates/{candidate_id:str}/confirm", status_code=303)
async def confirm_candidate(
    request: Request[Any, Any, State], state: State, tenant: str, user: str, candidate_id: str
) -> Response[Any]:
    ident = await _signed_in_as(request, tenant, user)
    form = await _form(request)
    edits = {k: form[k].strip() for k in ("content", "type", "applies") if form.get(k, "").strip()}
    await state.candidates.confirm(ident, candidate_id, state.memories, edits or None)
    return Redirect(_user_url(ident, "confirmed"), status_code=303)


@post(_USER + "/candidates/{candidate_id:str}/reject", status_code=303)
async def reject_candidate(
    request: Request[Any, Any, State], state: State, tenant: str, user: str, candidate_id: str
) -> Response[Any]:
    ident = await _signed_in_as(request, tenant, user)
    await _form(request)
    await state.candidates.reject(ident, candidate_id)
    return Redirect(_user_url(ident, "rejected"), status_code=303)


ROUTER = Router(
    path="/admin",
    route_handlers=[
        home,
        login,
        logout,
        user_page,
        memory_page,
        trace_page,
        edit_memory,
        delete_memory,
        delete_many,
        set_recall,
        confirm_candidate,
        reject_candidate,
    ],
    exception_handlers={MemgateError: _memgate_error},
    include_in_schema=False,
)

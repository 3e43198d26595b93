"""``/admin``: a small server-rendered page for whoever holds the admin token.

Signing in trades the token for a server-side session: a random id in an HttpOnly,
SameSite=Strict cookie, its hash in Redis (expiring with the session, deleted at sign-out), so
the token itself is never stored in the browser and every sign-in gets its own session. Every
form carries a CSRF token derived from the session. The page acts through the same services
as the memory API, as actor ``admin``, so the write gate, history and verified deletes are
the same. No JavaScript and no build step: every delete gets a confirmation page instead of
a script dialog, and the charts are inline SVG worked out on the server.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import structlog
from litestar import Request, Response, Router, get, post
from litestar.datastructures import Cookie
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery
from litestar.response import Redirect, Template

from gateway.clock import from_iso, to_iso
from gateway.errors import (
    BadRequest,
    MemgateError,
    NotFound,
    TooManyAttempts,
    Unauthorized,
    WriteRefused,
)
from gateway.http.admin_charts import SCORE_COLOURS, daily_chart, days_ending, score_chart
from gateway.http.admin_text import (
    GATE_REASONS,
    INVALID_DETAILS,
    LANGS,
    N_,
    pick_lang,
    translations,
)
from gateway.http.services import Services
from gateway.memory import identity as identity_mod
from gateway.memory.identity import Identity
from gateway.memory.policy import LEVELS
from gateway.memory.records import Memory
from gateway.memory.sensitivity import redact

log = structlog.get_logger("memgate.keys")

SESSION_COOKIE = "memgate_admin"
LANG_COOKIE = "memgate_lang"
SESSION_SECONDS = 12 * 3600
_CONFIRM = "yes"
PER_PAGE = 50
_MAX_PER_PAGE = 200
CHART_DAYS = 14
# The page needs no script, frame or outside resource: say so, and keep it out of caches.
_SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}

# Notices shown after a redirect (?done=<key>); their text lives in the templates.
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
# The user page's view (filters and page), carried through an edit so a refusal shows the
# same view again.
_VIEW_PARAMS = ("status", "project_id", "q", "page", "per_page")


def _sign(token: str, message: str) -> str:
    return hmac.new(token.encode(), message.encode(), hashlib.sha256).hexdigest()


def _digest(session: str) -> str:
    return hashlib.sha256(session.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class _Session:
    """A live admin session and the CSRF token its forms carry."""

    id: str
    csrf: str


# Where the session found for a request is kept for the page it renders (error pages too,
# which litestar's exception handlers render without the handler's parameters).
_SESSION_KEY = "memgate_admin_session"


async def _session(request: Request[Any, Any, Any], services: Services) -> _Session | None:
    """The live session of this request's cookie, or None (no token configured, no cookie,
    unknown, expired or signed out). Remembered on the request for the page it renders."""
    value = request.cookies.get(SESSION_COOKIE, "")
    token = services.settings.admin_token
    found = None
    if token and 0 < len(value) <= 128:
        if await services.store.admin_session_exists(_digest(value)):
            found = _Session(value, _sign(token, "csrf:" + value))
    request.state[_SESSION_KEY] = found
    return found


def _remembered_session(request: Request[Any, Any, Any]) -> _Session | None:
    found = request.state.get(_SESSION_KEY)
    return found if isinstance(found, _Session) else None


def _lang(request: Request[Any, Any, Any]) -> str:
    asked = request.query_params.get("lang")
    if asked in LANGS:
        return str(asked)
    return pick_lang(request.cookies.get(LANG_COOKIE), request.headers.get("accept-language"))


def _page(
    request: Request[Any, Any, Any], name: str, status: int = 200, **context: Any
) -> Template:
    lang = _lang(request)
    session = _remembered_session(request)
    words = translations(lang)
    template = Template(
        template_name=f"admin/{name}.html",
        context={
            "_": words.gettext,
            "ngettext": words.ngettext,
            "lang": lang,
            "path": request.url.path,
            "signed_in": session is not None,
            "csrf": session.csrf if session else "",
            "fmt": _fmt,
            "day": _day,
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
    """Times as YYYY-MM-DD HH:MM (UTC), the one date format of the page."""
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    if isinstance(value, str) and len(value) >= 16 and value[4] == "-" and "T" in value:
        return value[:16].replace("T", " ")
    return "" if value is None else str(value)


def _day(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d") if value else ""


def _user_url(ident: Identity, done: str | None = None) -> str:
    url = f"/admin/users/{quote(ident.tenant)}/{quote(ident.user)}"
    return f"{url}?done={done}" if done else url


def _int(value: str | None, default: int, low: int, high: int) -> int:
    try:
        return min(max(int(value or default), low), high)
    except ValueError:
        return default


@dataclass
class Paged:
    """One page of a list and where it sits (numbers start at 1)."""

    rows: list[Any]
    page: int
    pages: int
    per_page: int
    total: int
    first: int
    last: int


def _paged(items: list[Any], page: str | None, per_page: str | None) -> Paged:
    """The page asked for; an out-of-range page shows the nearest one."""
    size = _int(per_page, PER_PAGE, 1, _MAX_PER_PAGE)
    pages = max(1, math.ceil(len(items) / size))
    number = _int(page, 1, 1, pages)
    first = (number - 1) * size
    return Paged(
        rows=items[first : first + size],
        page=number,
        pages=pages,
        per_page=size,
        total=len(items),
        first=first + 1 if items else 0,
        last=min(first + size, len(items)),
    )


def _page_link(params: dict[str, str], page: int) -> str:
    kept = {k: v for k, v in params.items() if v and k not in ("page", "done", "lang")}
    return "?" + urlencode({**kept, "page": page})


async def _tenant_labels(services: Services) -> dict[str, str]:
    """Each tenant's name: the labels of the gateway keys mapped to it."""
    names: dict[str, list[str]] = {}
    for key in await services.gate.keyring.list():
        names.setdefault(key.tenant, []).append(key.label)
    return {tenant: ", ".join(sorted(set(labels))) for tenant, labels in names.items()}


async def _form(request: Request[Any, Any, Any], services: Services) -> dict[str, str]:
    """The posted form, after checking the session and its CSRF token."""
    session = await _session(request, services)
    if session is None:
        raise Unauthorized("Sign in to the admin page again.", code="admin_signed_out")
    form = await request.form()
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    if not hmac.compare_digest(values.get("csrf", ""), session.csrf):
        raise BadRequest("The form expired; reload the page and try again.", code="csrf")
    return values


def _memgate_error(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
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
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    tenant: FromQuery[str | None] = None,
    q: FromQuery[str | None] = None,
    page: FromQuery[str | None] = None,
    per_page: FromQuery[str | None] = None,
    done: FromQuery[str | None] = None,
) -> Template:
    """Tenants and users, searched by tenant id or name (exactly, via ``tenant``, or a part
    of it via ``q``) and by user, a page at a time."""
    if await _session(request, services) is None:
        return _page(request, "login", configured=bool(services.settings.admin_token))
    labels = await _tenant_labels(services)
    owners = await services.memories.owners()
    if tenant:
        owners = [o for o in owners if o["tenant"] == tenant]
    needle = (q or "").strip().casefold()
    if needle:
        owners = [
            o
            for o in owners
            if needle in o["user"].casefold()
            or needle in o["tenant"].casefold()
            or needle in labels.get(o["tenant"], "").casefold()
        ]
    params = {"tenant": tenant or "", "q": q or "", "per_page": per_page or ""}
    return _page(
        request,
        "home",
        owners=_paged(owners, page, per_page),
        labels=labels,
        tenant=tenant or "",
        q=q or "",
        link=lambda n: _page_link(params, n),
        done=done if done in _DONE else None,
    )


@post("/login", status_code=303)
async def login(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> Response[Any]:
    token = services.settings.admin_token
    given = (await request.form()).get("token", "")
    try:
        services.gate.check_admin_token(request, given if isinstance(given, str) else None)
    except TooManyAttempts as exc:
        wait = exc.extra["retry_after"]
        return _page(request, "login", status=429, configured=bool(token), locked=wait)
    except Unauthorized:
        return _page(request, "login", status=401, configured=bool(token), failed=True)
    value = secrets.token_urlsafe(32)
    await services.store.put_admin_session(_digest(value), SESSION_SECONDS)
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
async def logout(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> Response[Any]:
    await _form(request, services)
    await services.store.delete_admin_session(_digest(request.cookies[SESSION_COOKIE]))
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


async def _signed_in_as(
    request: Request[Any, Any, Any], services: Services, tenant: str, user: str
) -> Identity:
    if await _session(request, services) is None:
        raise Unauthorized("Sign in to the admin page.", code="admin_signed_out")
    return identity_mod.for_admin(tenant, user)


async def _user_view(
    request: Request[Any, Any, Any],
    services: Services,
    ident: Identity,
    view: dict[str, str],
    *,
    status: int = 200,
    done: str | None = None,
    refused: dict[str, Any] | None = None,
) -> Template:
    """The user page for ``view`` (filters and page); ``refused`` re-shows an edit the write
    gate refused, with the text as typed and the reasons."""
    everything = await services.memories.list(ident)
    candidates = await services.candidates.list(ident)
    traces = await services.store.recent_traces(ident.tenant, ident.user)
    days = days_ending(services.clock.now(), CHART_DAYS)
    per_day = await services.store.daily_recall(ident.tenant, ident.user, days)
    settings = await services.store.has_settings(ident.tenant, ident.user)
    known = everything or candidates or traces or settings or any(per_day.values())
    if not known:
        return _page(
            request,
            "error",
            status=404,
            back="/admin",
            message=translations(_lang(request)).gettext(
                "No memories, candidates or answers for this user."
            ),
        )
    status_filter, project_filter = view.get("status", ""), view.get("project_id", "")
    needle = view.get("q", "").strip().casefold()
    shown = [
        m
        for m in everything
        if (not status_filter or m.status == status_filter)
        and (not project_filter or m.project_id == project_filter)
        and (not needle or needle in m.content.casefold())
    ]
    if refused is not None and all(m.id != refused["id"] for m in shown):
        shown.insert(0, next(m for m in everything if m.id == refused["id"]))
    params = {k: view.get(k, "") for k in _VIEW_PARAMS}
    labels = await _tenant_labels(services)
    return _page(
        request,
        "user",
        status=status,
        ident=ident,
        tenant_label=labels.get(ident.tenant, ""),
        memories=_paged(shown, view.get("page"), view.get("per_page")),
        link=lambda n: _page_link(params, n),
        view=urlencode({k: v for k, v in params.items() if v}),
        total=len(everything),
        projects=sorted({m.project_id for m in everything if m.project_id}),
        statuses=sorted({m.status for m in everything}),
        status_filter=status_filter,
        project_filter=project_filter,
        q=view.get("q", ""),
        candidates=candidates,
        paused=await services.store.is_recall_paused(ident.tenant, ident.user),
        traces=traces,
        chart=daily_chart(per_day),
        chart_days=CHART_DAYS,
        types=sorted(services.policy.types),
        done=done if done in _DONE else None,
        refused=refused,
    )


@get(_USER)
async def user_page(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    tenant: FromPath[str],
    user: FromPath[str],
    done: FromQuery[str | None] = None,
) -> Template:
    ident = await _signed_in_as(request, services, tenant, user)
    view = {k: str(request.query_params.get(k) or "") for k in _VIEW_PARAMS}
    return await _user_view(request, services, ident, view, done=done)


def _change_rows(changes: dict[str, Any], prefix: str = "") -> list[dict[str, Any]]:
    """A history entry's changes as rows: ``before → after`` where a value changed, the
    value alone where it was set (a new memory's source, type, scope)."""
    rows: list[dict[str, Any]] = []
    for key, value in (changes or {}).items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            rows += _change_rows(value, prefix=f"{name} · ")
        elif isinstance(value, list) and len(value) == 2 and key != "supersedes":
            before, after = value
            if before is None:
                rows.append({"field": name, "before": None, "after": _shown(after)})
            else:
                rows.append({"field": name, "before": _shown(before), "after": _shown(after)})
        elif value not in (None, [], ""):
            rows.append({"field": name, "before": None, "after": _shown(value)})
    return rows


def _shown(value: Any) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "—"
    return _fmt(value)


@get(_USER + "/memories/{memory_id:str}")
async def memory_page(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    tenant: FromPath[str],
    user: FromPath[str],
    memory_id: FromPath[str],
) -> Template:
    ident = await _signed_in_as(request, services, tenant, user)
    memory = await services.memories.get(ident, memory_id)
    history = await services.store.history(ident.tenant, ident.user, memory_id)
    for entry in history:
        entry["rows"] = _change_rows(entry.get("changes") or {})
    return _page(
        request,
        "memory",
        ident=ident,
        m=memory,
        history=history,
        types=sorted(services.policy.types),
    )


@get(_USER + "/traces/{trace_id:str}")
async def trace_page(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    tenant: FromPath[str],
    user: FromPath[str],
    trace_id: FromPath[str],
) -> Template:
    ident = await _signed_in_as(request, services, tenant, user)
    trace = await services.store.get_trace(ident.tenant, ident.user, trace_id)
    if trace is None:
        return _page(
            request,
            "error",
            status=404,
            back=_user_url(ident),
            message=translations(_lang(request)).gettext(
                "No such trace for this user (traces expire)."
            ),
        )
    candidates = trace.get("candidates") or []
    ids = [cand["id"] for cand in candidates]
    found = await services.store.memories_by_id(ident.tenant, ident.user, ids)
    by_id = {memory.id: memory.content for memory in found.values()}
    contents = {i: by_id.get(i, "") for i in ids}
    return _page(
        request,
        "trace",
        ident=ident,
        trace=trace,
        contents=contents,
        chart=score_chart(candidates, services.policy),
        colours=SCORE_COLOURS,
        relevance=services.policy.recall.relevance,
    )


def _explain(
    reasons: list[str], form: dict[str, str], services: Services, lang: str
) -> list[dict[str, str]]:
    """Each rule that refused an edit and why, in the page's language."""
    words = translations(lang)
    out = []
    for reason in reasons:
        why = words.gettext(GATE_REASONS.get(reason, reason))
        if reason == "invalid":
            details = _invalid_details(form, services)
            if details:
                why = "; ".join(words.gettext(INVALID_DETAILS[d]) for d in details)
                why = why.format(limit=services.policy.limits.max_content_chars)
        out.append({"rule": reason, "why": why})
    return out


def _invalid_details(form: dict[str, str], services: Services) -> list[str]:
    found = []
    content = form.get("content", "")
    if not content.strip():
        found.append("empty")
    if len(content.strip()) > services.policy.limits.max_content_chars:
        found.append("too_long")
    if form.get("type") and form["type"] not in services.policy.types:
        found.append("type")
    day = form.get("expires_on", "")
    if day:
        try:
            if from_iso(f"{day}T23:59:59Z") <= services.clock.now():
                found.append("expiry_past")
        except ValueError:
            found.append("expiry_format")
    return found


def _storable(text: str, services: Services) -> str:
    """``text`` with whatever the policy would not store taken out (the page may show an
    admin what they typed, but never a secret back)."""
    sensitivity = services.policy.sensitivity
    floor = next((lvl for lvl in LEVELS if not sensitivity.may_store(lvl)), None)
    return redact(text, services.policy, min_level=floor) if floor else text


@post(_USER + "/memories/{memory_id:str}/edit", status_code=303)
async def edit_memory(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    tenant: FromPath[str],
    user: FromPath[str],
    memory_id: FromPath[str],
) -> Response[Any]:
    ident = await _signed_in_as(request, services, tenant, user)
    form = await _form(request, services)
    memory = await services.memories.get(ident, memory_id)
    view = dict(parse_qsl(form.get("view", "")))
    view = {k: v for k, v in view.items() if k in _VIEW_PARAMS}
    try:
        changes = _edits(form, memory)
        if changes:
            await services.memories.update(ident, memory_id, changes, actor="admin")
    except (WriteRefused, BadRequest) as exc:
        reasons = list(exc.extra.get("reasons") or ["invalid"])
        if isinstance(exc, BadRequest) and exc.param != "expires_on":
            raise
        refused = {
            "id": memory_id,
            "content": _storable(form.get("content", ""), services),
            "type": form.get("type") or memory.type,
            "applies": form.get("applies") or memory.applies,
            "expires_on": form.get("expires_on", ""),
            "reasons": _explain(reasons, form, services, _lang(request)),
        }
        return await _user_view(request, services, ident, view, status=422, refused=refused)
    target = _user_url(ident)
    return Redirect(
        target + "?" + urlencode({**{k: v for k, v in view.items() if v}, "done": "saved"}),
        status_code=303,
    )


def _edits(form: dict[str, str], memory: Memory) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    if form.get("content", "").strip() and form["content"].strip() != memory.content:
        changes["content"] = form["content"].strip()
    if form.get("type") and form["type"] != memory.type:
        changes["type"] = form["type"]
    if form.get("applies") and form["applies"] != memory.applies:
        changes["applies"] = form["applies"]
    if "expires_on" in form:
        changes.update(_expiry_change(form["expires_on"].strip(), memory.expires_at))
    return changes


def _expiry_change(day: str, current: datetime | None) -> dict[str, Any]:
    """A YYYY-MM-DD field: empty clears the expiry, a day means the end of that day (UTC)."""
    if day == _day(current):
        return {}
    if not day:
        return {"expires_at": None}
    try:
        if len(day) != 10:
            raise ValueError(day)
        when = from_iso(f"{day}T23:59:59Z")
    except ValueError:
        raise BadRequest(
            "The expiry must be a date (YYYY-MM-DD).",
            param="expires_on",
            extra={"reasons": ["invalid"]},
        ) from None
    return {"expires_at": to_iso(when)}


@post(_USER + "/memories/{memory_id:str}/delete", status_code=303)
async def delete_memory(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    tenant: FromPath[str],
    user: FromPath[str],
    memory_id: FromPath[str],
) -> Response[Any]:
    """Delete one memory: the first post shows it and asks for confirmation."""
    ident = await _signed_in_as(request, services, tenant, user)
    form = await _form(request, services)
    memory = await services.memories.get(ident, memory_id)
    if form.get("confirm") != _CONFIRM:
        return _page(request, "confirm", ident=ident, memory=memory, count=1)
    await services.memories.delete(ident, memory_id, actor="admin")
    return Redirect(_user_url(ident, "deleted"), status_code=303)


@post(_USER + "/delete", status_code=303)
async def delete_many(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    tenant: FromPath[str],
    user: FromPath[str],
) -> Response[Any]:
    """Delete a project's memories, or all of them: the first post asks for confirmation."""
    ident = await _signed_in_as(request, services, tenant, user)
    form = await _form(request, services)
    everything = form.get("all") == "true"
    project = None if everything else form.get("project_id", "")
    if project is not None:
        identity_mod.check_project_id(project, param="project_id")
    if form.get("confirm") != _CONFIRM:
        affected = await services.memories.list(ident, project_id=project)
        return _page(
            request,
            "confirm",
            status=200,
            ident=ident,
            project_id=project,
            everything=everything,
            count=len(affected),
            memory=None,
        )
    await services.memories.delete_where(
        ident, project_id=project, everything=everything, actor="admin"
    )
    await services.candidates.forget(ident, project_id=project)
    done = "deleted_all" if everything else "deleted_project"
    if everything and not await _has_anything(services, ident):
        # Nothing left to show for this user: back to the list, with the notice.
        return Redirect(
            "/admin?" + urlencode({"tenant": ident.tenant, "done": done}), status_code=303
        )
    return Redirect(_user_url(ident, done), status_code=303)


async def _has_anything(services: Services, ident: Identity) -> bool:
    if await services.memories.list(ident) or await services.candidates.list(ident):
        return True
    if await services.store.recent_traces(ident.tenant, ident.user):
        return True
    return await services.store.has_settings(ident.tenant, ident.user)


@post(_USER + "/recall", status_code=303)
async def set_recall(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    tenant: FromPath[str],
    user: FromPath[str],
) -> Response[Any]:
    ident = await _signed_in_as(request, services, tenant, user)
    paused = (await _form(request, services)).get("paused") == "true"
    await services.store.set_recall_paused(ident.tenant, ident.user, paused)
    return Redirect(_user_url(ident, "paused" if paused else "resumed"), status_code=303)


@post(_USER + "/candidates/{candidate_id:str}/confirm", status_code=303)
async def confirm_candidate(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    tenant: FromPath[str],
    user: FromPath[str],
    candidate_id: FromPath[str],
) -> Response[Any]:
    ident = await _signed_in_as(request, services, tenant, user)
    form = await _form(request, services)
    edits = {k: form[k].strip() for k in ("content", "type", "applies") if form.get(k, "").strip()}
    await services.candidates.confirm(ident, candidate_id, services.memories, edits or None)
    return Redirect(_user_url(ident, "confirmed"), status_code=303)


@post(_USER + "/candidates/{candidate_id:str}/reject", status_code=303)
async def reject_candidate(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    tenant: FromPath[str],
    user: FromPath[str],
    candidate_id: FromPath[str],
) -> Response[Any]:
    ident = await _signed_in_as(request, services, tenant, user)
    await _form(request, services)
    await services.candidates.reject(ident, candidate_id)
    return Redirect(_user_url(ident, "rejected"), status_code=303)


# -- gateway keys ----------------------------------------------------------------------------
# The page shows a key's secret once, in the answer to the post that made it (creation or
# rotation), never in a URL or a page that can be fetched again; the upstream key is never
# shown, only whether a key has one.

_KEYS_DONE = {"revoked"}
_KEY_FIELD_ERRORS = {
    "label": N_("The label must be 1 to 64 characters, without control characters."),
    "tenant": N_("Choose the tenant from the list, or a new tenant."),
}


async def _signed_in(request: Request[Any, Any, Any], services: Services) -> None:
    if await _session(request, services) is None:
        raise Unauthorized("Sign in to the admin page.", code="admin_signed_out")


async def _known_tenants(services: Services) -> dict[str, str]:
    """Tenants a new key may join: those of existing keys and those with memories, each
    with its name (the labels of its keys; empty for a tenant without keys)."""
    labels = await _tenant_labels(services)
    tenants = {o["tenant"]: labels.get(o["tenant"], "") for o in await services.memories.owners()}
    return dict(sorted({**tenants, **labels}.items(), key=lambda kv: (kv[1] == "", kv[1], kv[0])))


async def _keys_view(
    request: Request[Any, Any, Any],
    services: Services,
    *,
    status: int = 200,
    done: str | None = None,
    error: str | None = None,
    label: str = "",
    tenant: str = "",
) -> Template:
    keys = sorted(
        await services.gate.keyring.list(), key=lambda k: (k.label.casefold(), k.created_at)
    )
    return _page(
        request,
        "keys",
        status=status,
        keys=keys,
        tenants=await _known_tenants(services),
        done=done if done in _KEYS_DONE else None,
        error=error,
        label=label,
        tenant=tenant,
    )


@get("/keys")
async def keys_page(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    tenant: FromQuery[str | None] = None,
    done: FromQuery[str | None] = None,
) -> Template:
    """The gateway keys, without their secrets, and the form that issues one."""
    await _signed_in(request, services)
    return await _keys_view(request, services, done=done, tenant=tenant or "")


def _secret_page(
    request: Request[Any, Any, Any], key: Any, secret: str, *, rotated: bool
) -> Template:
    return _page(request, "key_secret", status=200, key=key, secret=secret, rotated=rotated)


@post("/keys", status_code=200)
async def create_key(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> Template:
    """Issue a key; the answer is the only page that ever shows its secret."""
    await _signed_in(request, services)
    form = await _form(request, services)
    label = form.get("label", "").strip()
    tenant = form.get("tenant", "")
    upstream_key = form.get("upstream_key", "").strip() or None
    words = translations(_lang(request))
    if tenant and tenant not in await _known_tenants(services):
        error = words.gettext(_KEY_FIELD_ERRORS["tenant"])
        return await _keys_view(request, services, status=422, error=error, label=label)
    try:
        key, secret = await services.gate.keyring.create(
            label, tenant=tenant or None, upstream_key=upstream_key
        )
    except BadRequest as exc:
        if exc.param not in _KEY_FIELD_ERRORS:
            raise
        error = words.gettext(_KEY_FIELD_ERRORS[exc.param])
        return await _keys_view(
            request,
            services,
            status=422,
            error=error,
            label=_storable(label, services),
            tenant=tenant,
        )
    log.info("gateway_key_created", key_id=key.id, tenant=key.tenant, actor="admin")
    return _secret_page(request, key, secret, rotated=False)


async def _key(services: Services, key_id: str) -> Any:
    for key in await services.gate.keyring.list():
        if key.id == key_id:
            return key
    raise NotFound(f"No gateway key {key_id[:40]!r}.", param="id")


@post("/keys/{key_id:str}/rotate", status_code=200)
async def rotate_key(
    request: Request[Any, Any, Any], services: NamedDependency[Services], key_id: FromPath[str]
) -> Template:
    """A new secret for the key, after a confirmation page; the old one stops working."""
    await _signed_in(request, services)
    form = await _form(request, services)
    key = await _key(services, key_id)
    if form.get("confirm") != _CONFIRM:
        return _page(request, "key_confirm", key=key, action="rotate")
    key, secret = await services.gate.keyring.rotate(key.id)
    log.info("gateway_key_rotated", key_id=key.id, actor="admin")
    return _secret_page(request, key, secret, rotated=True)


@post("/keys/{key_id:str}/revoke", status_code=303)
async def revoke_key(
    request: Request[Any, Any, Any], services: NamedDependency[Services], key_id: FromPath[str]
) -> Response[Any]:
    """Revoke the key, after a confirmation page: its secret stops working at once."""
    await _signed_in(request, services)
    form = await _form(request, services)
    key = await _key(services, key_id)
    if form.get("confirm") != _CONFIRM:
        last = len(await services.gate.keyring.list()) == 1
        return _page(request, "key_confirm", key=key, action="revoke", last=last)
    await services.gate.keyring.revoke(key.id)
    log.info("gateway_key_revoked", key_id=key.id, actor="admin")
    return Redirect("/admin/keys?done=revoked", status_code=303)


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
        keys_page,
        create_key,
        rotate_key,
        revoke_key,
    ],
    exception_handlers={MemgateError: _memgate_error},
    include_in_schema=False,
)

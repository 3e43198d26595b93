"""structlog set-up: JSON lines, context variables first, one summary line per request.

Every line, memgate's own and those of the libraries under it (uvicorn's "Exception in ASGI
application" included), goes through the same processors: an exception is written as its
types and code positions only. Frame locals would carry the ASGI scope (the client's key,
the admin token, session cookies) and request bodies; exception messages often quote their
input (a decoder's error, a failed lookup's key), so neither is ever written.
"""

from __future__ import annotations

import logging
import sys
from types import TracebackType
from typing import Any, TextIO

import structlog
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import EventDict, WrappedLogger

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
_FRAMES = ExceptionDictTransformer(show_locals=False, use_rich=False)
_HANDLER_NAME = "memgate"

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


def _exc_info(value: Any) -> ExcInfo | None:
    if isinstance(value, BaseException):
        return (type(value), value, value.__traceback__)
    if isinstance(value, tuple) and len(value) == 3 and value[0] is not None:
        return value  # type: ignore[return-value]
    if value is True:
        info = sys.exc_info()
        return info if info[0] is not None else None  # type: ignore[return-value]
    return None


def safe_tracebacks(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """``exc_info`` as exception types and frames (file, line, function): no locals, no
    messages. Any pre-rendered ``exception``/``stack`` text is dropped for the same reason."""
    info = _exc_info(event_dict.pop("exc_info", None))
    event_dict.pop("stack", None)
    event_dict.pop("exception", None)
    if info is not None:
        event_dict["exception"] = [
            {
                "exc_type": stack["exc_type"],
                "is_cause": stack.get("is_cause", False),
                "frames": [
                    {"filename": f["filename"], "lineno": f["lineno"], "name": f["name"]}
                    for f in stack.get("frames", [])
                ],
            }
            for stack in _FRAMES(info)
        ]
    return event_dict


class _Stderr:
    """Writes to whatever ``sys.stderr`` is at the time of the write."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(
    level: str = "info", *, stream: TextIO | None = None, cache: bool = True
) -> None:
    """JSON lines on ``stream`` (stderr by default) for structlog and stdlib loggers alike.

    ``cache=False`` keeps loggers re-reading the configuration (for a caller that swaps it)."""
    numeric = _LEVELS.get(level.lower())
    if numeric is None:
        raise SystemExit(
            f"memgate: bad MEMGATE_LOG_LEVEL {level!r}: use one of {', '.join(_LEVELS)}"
        )
    out: Any = stream if stream is not None else _Stderr()
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        safe_tracebacks,
    ]
    handler = logging.StreamHandler(out)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.JSONRenderer(),
            ],
            foreign_pre_chain=[
                structlog.stdlib.add_logger_name,
                *shared,
            ],
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    # HTTP client libraries log calls in plain text; memgate's own summary line covers them.
    for name in ("httpx", "httpcore", "aiohttp"):
        logging.getLogger(name).setLevel(
            logging.DEBUG if numeric <= logging.DEBUG else logging.WARNING
        )
    # uvicorn's loggers write through the root handler above (serve passes log_config=None).
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    structlog.configure(
        processors=[*shared, structlog.processors.JSONRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=cache,
    )

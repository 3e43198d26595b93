"""memgate's errors, each mapped to OpenAI's error shape in one handler (see ``app.py``).

MemgateError
 ├── BadRequest (400, invalid_request_error)
 │    ├── InvalidJSON           code=invalid_json
 │    ├── MissingField          code=missing_required_parameter
 │    └── InvalidIdentity       code=invalid_header
 ├── Unauthorized (401, authentication_error)
 ├── NotFound (404, not_found_error)
 ├── TooManyAttempts (429, rate_limit_error, code=too_many_attempts)
 ├── Conflict (409, invalid_request_error)
 ├── RequestTooLarge (413, invalid_request_error, code=request_too_large)
 ├── WriteRefused (422, invalid_request_error, code=write_refused)
 ├── UpstreamError
 │    ├── UpstreamUnreachable   (502, code=upstream_unreachable)
 │    └── UpstreamTimeout       (504, code=upstream_timeout)
 └── BackendUnavailable (503, code=memory_backend_unavailable)
"""

from __future__ import annotations

from typing import Any


class MemgateError(Exception):
    status_code = 500
    error_type = "server_error"
    code: str | None = "internal_error"

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        self.extra = extra or {}

    def to_body(self) -> dict[str, Any]:
        return error_body(self.message, self.error_type, self.param, self.code, **self.extra)


class BadRequest(MemgateError):
    status_code = 400
    error_type = "invalid_request_error"
    code = "invalid_request"


class InvalidJSON(BadRequest):
    code = "invalid_json"


class MissingField(BadRequest):
    code = "missing_required_parameter"


class InvalidIdentity(BadRequest):
    code = "invalid_header"


class Unauthorized(MemgateError):
    status_code = 401
    error_type = "authentication_error"
    code = "invalid_api_key"


class NotFound(MemgateError):
    status_code = 404
    error_type = "not_found_error"
    code = "not_found"


class TooManyAttempts(MemgateError):
    """Too many wrong admin tokens from one peer: it waits before any token is checked."""

    status_code = 429
    error_type = "rate_limit_error"
    code = "too_many_attempts"


class Conflict(MemgateError):
    status_code = 409
    error_type = "invalid_request_error"
    code = "conflict"


class RequestTooLarge(MemgateError):
    status_code = 413
    error_type = "invalid_request_error"
    code = "request_too_large"


class WriteRefused(MemgateError):
    status_code = 422
    error_type = "invalid_request_error"
    code = "write_refused"


class UpstreamError(MemgateError):
    error_type = "upstream_error"


class UpstreamUnreachable(UpstreamError):
    status_code = 502
    code = "upstream_unreachable"


class UpstreamTimeout(UpstreamError):
    status_code = 504
    code = "upstream_timeout"


class BackendUnavailable(MemgateError):
    status_code = 503
    code = "memory_backend_unavailable"


def error_body(
    message: str,
    error_type: str,
    param: str | None = None,
    code: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "error": {"message": message, "type": error_type, "param": param, "code": code, **extra}
    }

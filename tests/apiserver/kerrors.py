"""metav1.Status errors as k8s.io/apimachinery/pkg/api/errors builds them, and field.Error."""

import json


def _go_quote(v):
    return json.dumps(v, ensure_ascii=False)


class GoLiteral(str):
    """A bad value printed verbatim (e.g. 0x0, as Go prints a uint64 with %#v)."""


def _go_value(v):
    """How field.Error.ErrorBody prints a bad value (%q for strings, %v for numbers, %#v else)."""
    if isinstance(v, GoLiteral):
        return str(v)
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, str):
        return _go_quote(v)
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


class FieldError:
    """field.Error: Type, Field, BadValue, Detail."""

    TYPES = {
        "NotFound": ("FieldValueNotFound", "Not found"),
        "Required": ("FieldValueRequired", "Required value"),
        "Duplicate": ("FieldValueDuplicate", "Duplicate value"),
        "Invalid": ("FieldValueInvalid", "Invalid value"),
        "NotSupported": ("FieldValueNotSupported", "Unsupported value"),
        "Forbidden": ("FieldValueForbidden", "Forbidden"),
        "TooLong": ("FieldValueTooLong", "Too long"),
        "TooMany": ("FieldValueTooMany", "Too many"),
        "Internal": ("InternalError", "Internal error"),
    }
    NO_VALUE = object()

    def __init__(self, etype, field, value=NO_VALUE, detail=""):
        self.etype = etype
        self.field = field
        self.value = value
        self.detail = detail

    @classmethod
    def required(cls, field, detail=""):
        return cls("Required", field, cls.NO_VALUE, detail)

    @classmethod
    def forbidden(cls, field, detail):
        return cls("Forbidden", field, cls.NO_VALUE, detail)

    @classmethod
    def invalid(cls, field, value, detail):
        return cls("Invalid", field, value, detail)

    @classmethod
    def duplicate(cls, field, value):
        return cls("Duplicate", field, value, "")

    @classmethod
    def not_found(cls, field, value):
        return cls("NotFound", field, value, "")

    @classmethod
    def not_supported(cls, field, value, supported):
        return cls("NotSupported", field, value, "supported values: " + ", ".join(_go_quote(s) for s in supported))

    @classmethod
    def too_long(cls, field, limit):
        return cls("TooLong", field, cls.NO_VALUE, "must have at most %d bytes" % limit)

    def body(self):
        label = self.TYPES[self.etype][1]
        if self.etype in ("Required", "Forbidden", "TooLong", "Internal") or self.value is self.NO_VALUE:
            s = label
        else:
            s = "%s: %s" % (label, _go_value(self.value))
        if self.detail:
            s += ": " + self.detail
        return s

    def __str__(self):
        return "%s: %s" % (self.field, self.body())

    def cause(self):
        return {"reason": self.TYPES[self.etype][0], "message": self.body(), "field": self.field}


class ApiError(Exception):
    """An error answered as a metav1.Status body."""

    def __init__(self, code, reason, message, details=None, headers=None, metadata=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}
        self.metadata = metadata or {}
        self.raw = None  # a complete metav1.Status answered as is (see from_status)

    def status(self):
        if self.raw is not None:
            return dict(self.raw)
        s = {"kind": "Status", "apiVersion": "v1", "metadata": dict(self.metadata), "status": "Failure",
             "message": self.message, "reason": self.reason}
        if self.details is not None:
            s["details"] = self.details
        s["code"] = self.code
        return s

    # -- constructors mirroring k8s.io/apimachinery/pkg/api/errors -------------------------------

    @classmethod
    def from_status(cls, status):
        """A StatusError carrying a metav1.Status as received (a webhook's denial is passed on so)."""
        e = cls(status.get("code"), status.get("reason") or "", status.get("message") or "", status.get("details"))
        e.raw = status
        return e

    @staticmethod
    def _details(gr, name=None, **extra):
        d = {}
        if name:
            d["name"] = name
        if gr.group:
            d["group"] = gr.group
        d["kind"] = gr.resource
        d.update(extra)
        return d

    @classmethod
    def not_found(cls, gr, name):
        return cls(404, "NotFound", '%s "%s" not found' % (gr.qualified(), name), cls._details(gr, name))

    @classmethod
    def already_exists(cls, gr, name):
        return cls(409, "AlreadyExists", '%s "%s" already exists' % (gr.qualified(), name), cls._details(gr, name))

    @classmethod
    def conflict(cls, gr, name, err):
        return cls(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": %s' % (gr.qualified(), name, err),
                   cls._details(gr, name))

    OPTIMISTIC_LOCK_MSG = "the object has been modified; please apply your changes to the latest version and try again"

    @classmethod
    def stale(cls, gr, name):
        return cls.conflict(gr, name, cls.OPTIMISTIC_LOCK_MSG)

    @classmethod
    def invalid(cls, group, kind, name, errs):
        if len(errs) == 1:
            agg = str(errs[0])
        else:
            agg = "[" + ", ".join(str(e) for e in errs) + "]"
        qualified = kind + ("." + group if group else "")
        details = {}
        if name:
            details["name"] = name
        if group:
            details["group"] = group
        details["kind"] = kind
        details["causes"] = [e.cause() for e in errs]
        return cls(422, "Invalid", '%s "%s" is invalid: %s' % (qualified, name, agg), details)

    @classmethod
    def bad_request(cls, message):
        return cls(400, "BadRequest", message)

    @classmethod
    def method_not_supported(cls, gr, action):
        return cls(405, "MethodNotAllowed", '%s is not supported on resources of kind "%s"' % (action, gr.qualified()),
                   {"group": gr.group, "kind": gr.resource} if gr.group else {"kind": gr.resource})

    @classmethod
    def generic(cls, code, message=None):
        """NewGenericServerResponse without a resource (the message is the fixed generic one)."""
        table = {
            400: ("BadRequest", "the server rejected our request for an unknown reason"),
            401: ("Unauthorized", "the server has asked for the client to provide credentials"),
            404: ("NotFound", "the server could not find the requested resource"),
            405: ("MethodNotAllowed", "the server does not allow this method on the requested resource"),
            409: ("Conflict", "the server reported a conflict"),
            422: ("Invalid", "the server rejected our request due to an error in our request"),
            429: ("TooManyRequests", "the server has received too many requests and has asked us to try again later"),
            504: ("Timeout", "the server was unable to return a response in the time allotted, but may still be "
                             "processing the request"),
        }
        reason, msg = table.get(code, ("InternalError" if code >= 500 else "Unknown",
                                       "the server responded with the status code %d but did not return more "
                                       "information" % code))
        return cls(code, reason, message or msg, {})

    @classmethod
    def not_found_path(cls):
        return cls(404, "NotFound", "the server could not find the requested resource", {})

    @classmethod
    def unsupported_media_type(cls, accepted):
        return cls(415, "UnsupportedMediaType",
                   "the body of the request was in an unknown format - accepted media types include: " +
                   ", ".join(accepted))

    @classmethod
    def expired(cls, message, metadata=None):
        return cls(410, "Expired", message, None, metadata=metadata)

    @classmethod
    def gone(cls, message):
        return cls(410, "Gone", message)

    @classmethod
    def internal(cls, message):
        return cls(500, "InternalError", "Internal error occurred: " + message, {"causes": [{"message": message}]})

    @classmethod
    def unauthorized(cls):
        return cls(401, "Unauthorized", "Unauthorized")

    @classmethod
    def too_many_requests(cls, retry_after):
        return cls(429, "TooManyRequests", "Too many requests, please try again later.",
                   {"retryAfterSeconds": int(retry_after)}, headers={"Retry-After": str(int(retry_after))})

    @classmethod
    def timeout(cls, message, retry_after=0, causes=None):
        d = {}
        if causes:
            d["causes"] = causes
        if retry_after:
            d["retryAfterSeconds"] = retry_after
        return cls(504, "Timeout", "Timeout: " + message, d)

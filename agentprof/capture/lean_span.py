"""The span class of agentprof's hot path: a complete OpenTelemetry span at a fraction of the SDK span's cost.

Tool, parse and custom-phase spans are started and ended on the agent's own thread, often thousands of times
per run, so their cost is the profiler's overhead. The SDK's span class builds locks, bounded containers and
a read-only copy for every span; this one is both an API ``Span`` (it can be the current span, and anything
started under it, agentprof's or the application's own OpenTelemetry spans, nests under it) and an SDK
``ReadableSpan``, which it hands to the span processor itself when it ends, as the SDK span hands its copy.
Processors and exporters see the same fields the SDK span would give them (name, ids, parent, kind, times,
status, attributes, events, links, resource, scope).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from time import time_ns as _time_ns
from typing import Any

from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace import Span as _SdkSpan
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode
from opentelemetry.util import types

_log = logging.getLogger("agentprof")

MAX_ATTRIBUTES = 1024
"""Same limit agentprof's tracer provider gives its SDK spans (attribute values are not truncated)."""

_UNSET = Status(StatusCode.UNSET)
UNSET_STATUS = _UNSET
"""The status of every lean span until one is set (a set status is stored on the span itself)."""
_SCALARS = (str, bool, int, float)

try:  # the SDK's own value cleaning, same results. Older SDKs (1.30-1.3x): ``_clean_attribute`` (key and
    # value; homogeneous scalar sequences), their ``_clean_attribute_value`` cleans scalars only; newer ones (1.4x)
    # have only ``_clean_attribute_value``, which cleans any value
    from opentelemetry.attributes import _clean_attribute

    def _sdk_clean_value(value: Any, max_len: int | None) -> Any:
        return _clean_attribute("attribute", value, max_len)
except ImportError:
    try:
        from opentelemetry.attributes import _clean_attribute_value as _sdk_clean_value
    except ImportError:  # pragma: no cover - other SDK versions
        _sdk_clean_value = None


def clean_value(value: Any) -> Any:
    """An attribute value as the SDK would store it (sequences become tuples); None when it is not storable."""
    if isinstance(value, _SCALARS):
        return value
    if _sdk_clean_value is not None:
        return _sdk_clean_value(value, None)
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):  # pragma: no cover
        items = tuple(value)
        kinds = {type(v) for v in items if v is not None}
        return items if len(kinds) <= 1 and kinds <= set(_SCALARS) else None
    return None  # pragma: no cover


class LeanSpan(trace_api.Span, ReadableSpan):
    """A recording span: API methods for the code it wraps, ``ReadableSpan`` fields for processors.

    Not built directly: :func:`agentprof.capture.provider.start_span` creates it. The fields every span of
    agentprof's tracer shares (resource, instrumentation scope, processor) live on the class, set once by
    :meth:`bind`; so do the defaults of fields most spans never change (no events, links or status), which an
    instance overrides when they change. ``_attributes`` is a plain dict that agentprof's own (always valid)
    values are written into directly; values set through the API are validated as the SDK would.
    """

    __slots__ = ("_name", "_context", "_parent", "_kind", "_attributes", "_start_time", "_end_time", "_shape")

    _resource: Any = None
    _instrumentation_scope: Any = None
    _instrumentation_info: Any = None
    _processor: Any = None
    _events: Sequence[Event] = ()
    _links: Sequence[Link] = ()
    _status: Status = _UNSET
    _dropped = 0

    def __init__(self, name: str, context: SpanContext, parent: SpanContext | None, kind: SpanKind,
                 attributes: dict[str, Any], start_time: int, shape: tuple[bytes, bytes, int] | None = None) -> None:
        self._name = name
        self._context = context
        self._parent = parent
        self._kind = kind
        self._attributes = attributes
        self._start_time = start_time
        self._end_time: int | None = None
        self._shape = shape  # its trace line pre-encoded (see capture.exporter.line_shape); dropped on any change

    @classmethod
    def bind(cls, resource: Any, scope: Any, info: Any, processor: Any) -> None:
        """Attach lean spans to a tracer: its resource and scope, and the processor their ``end`` calls."""
        cls._resource, cls._instrumentation_scope, cls._instrumentation_info = resource, scope, info
        cls._processor = processor

    # --- ReadableSpan --------------------------------------------------------------------------------------
    @property
    def dropped_attributes(self) -> int:
        return self._dropped

    # --- API Span ------------------------------------------------------------------------------------------
    def get_span_context(self) -> SpanContext:
        return self._context

    def is_recording(self) -> bool:
        return self._end_time is None

    def set_attribute(self, key: str, value: types.AttributeValue) -> None:
        if self._end_time is not None:
            _log.debug("attribute %r set on an ended span %r: ignored", key, self._name)
            return
        if not isinstance(key, str) or not key:
            _log.warning("invalid span attribute key %r: ignored", key)
            return
        cleaned = clean_value(value)
        if cleaned is None:  # a None value says nothing: dropped quietly; anything else unstorable is warned
            if value is not None:
                _log.warning("invalid type %s for span attribute %r: ignored", type(value).__name__, key)
            return
        self._shape = None
        attrs = self._attributes
        if key not in attrs and len(attrs) >= MAX_ATTRIBUTES:
            self._dropped += 1
            return
        attrs[key] = cleaned

    def set_attributes(self, attributes: Mapping[str, types.AttributeValue]) -> None:
        for key, value in attributes.items():
            self.set_attribute(key, value)

    def add_event(self, name: str, attributes: types.Attributes = None, timestamp: int | None = None) -> None:
        if self._end_time is not None:
            return
        clean = {k: c for k, v in (attributes or {}).items() if (c := clean_value(v)) is not None}
        if not isinstance(self._events, list):
            self._events = []
        self._events.append(Event(name, clean, _time_ns() if timestamp is None else timestamp))

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        if self._end_time is not None or context is None or not context.is_valid:
            return
        if not isinstance(self._links, list):
            self._links = []
        self._links.append(Link(context, attributes))

    def update_name(self, name: str) -> None:
        if self._end_time is None:
            self._name = name
            self._shape = None

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        if self._end_time is not None or self._status.status_code is StatusCode.OK:
            return  # as the SDK: OK is final, ended spans are read-only
        if isinstance(status, Status):
            if status.status_code is not StatusCode.UNSET:
                self._status = status
        elif isinstance(status, StatusCode) and status is not StatusCode.UNSET:
            self._status = Status(status, description)

    # the SDK span's own: an ``exception`` event built through ``add_event`` with the attributes this SDK records
    record_exception = _SdkSpan.record_exception

    def end(self, end_time: int | None = None) -> None:
        """Stamp the end time and hand the span to the processor (once; later calls are ignored)."""
        if self._end_time is not None:
            _log.debug("span %r ended twice: ignored", self._name)
            return
        self._end_time = _time_ns() if end_time is None else end_time
        self._processor.on_end(self)

    def __repr__(self) -> str:
        return f'{type(self).__name__}(name="{self._name}", context={self._context})'

"""The event value type, the registry of event types by name, and decoding with upcasting."""

from __future__ import annotations

import json
from typing import Any, Callable, ClassVar, NamedTuple

from pydantic import BaseModel, ConfigDict, ValidationError

from store.errors import InvalidEvent, StoreError, UnknownEventType

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

_registry: dict[str, type[Event]] = {}
_upcasters: dict[tuple[str, int], Upcaster] = {}


class Event(BaseModel):
    """An immutable fact, named in the past tense. Subclasses register themselves by class name.

    Raise `schema_version` when a change would make old payloads fail validation, and register an
    upcaster from the previous version so events already in the log still load.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    schema_version: ClassVar[int] = 1

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        name = cls.__name__
        if name in _registry and _registry[name] is not cls:
            raise TypeError(f"event type {name!r} is registered twice")
        _registry[name] = cls

    @classmethod
    def type_name(cls) -> str:
        return cls.__name__


def upcaster(type_name: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Register a function that turns a `from_version` payload into a `from_version + 1` payload."""

    def register(fn: Upcaster) -> Upcaster:
        _upcasters[(type_name, from_version)] = fn
        return fn

    return register


def event_class(type_name: str, seq: int | None = None) -> type[Event]:
    try:
        return _registry[type_name]
    except KeyError:
        raise UnknownEventType(type_name, seq) from None


def event_types() -> list[str]:
    return sorted(_registry)


def decode(type_name: str, schema_version: int, payload: str, seq: int | None = None) -> Event:
    """Load a stored payload as its current event class, upcasting older versions step by step."""
    cls = _registry.get(type_name)
    if cls is None:
        raise UnknownEventType(type_name, seq)
    try:
        if schema_version == cls.schema_version:
            # The validator itself, not model_validate_json: replay calls this once per event.
            return cls.__pydantic_validator__.validate_json(payload)
        return _upcast(cls, type_name, schema_version, payload, seq)
    except ValidationError as e:
        raise InvalidEvent(type_name, _first_error(e), seq) from None
    except json.JSONDecodeError as e:
        raise InvalidEvent(type_name, f"not JSON ({e.msg})", seq) from None


def _upcast(cls: type[Event], type_name: str, schema_version: int, payload: str, seq: int | None) -> Event:
    if schema_version > cls.schema_version:
        raise StoreError(
            f"event {seq} ({type_name}) has schema version {schema_version}; this agentd knows "
            f"up to {cls.schema_version}"
        )
    data = json.loads(payload)
    for version in range(schema_version, cls.schema_version):
        step = _upcasters.get((type_name, version))
        if step is None:
            raise InvalidEvent(type_name, f"no upcaster from schema version {version}", seq)
        data = step(data)
    return cls.model_validate(data)


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "payload"
    return f"{loc}: {err['msg']}"


class Recorded(NamedTuple):
    """An event as the log holds it: the value plus where and when it was recorded.

    A named tuple because appends and replays make one per event; it is as immutable as a dataclass.
    """

    seq: int
    stream_id: str
    stream_version: int
    recorded_at: str
    actor: str
    causation_id: str | None
    correlation_id: str | None
    event: Event

    @property
    def type(self) -> str:
        return type(self.event).__name__

"""The Blender layer's one error type: a sentence for the user, naming the chain (and frame) once."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..core import IKInputError


class IKSolversError(ValueError):
    """The rig, a chain's settings, its inputs or a bake cannot be used; ``str()`` is one sentence.

    Attributes
    ----------
    message : str
        What went wrong, without the chain's name.
    field : str or None
        The core's offending field (``IKInputError.field``) when the core refused the input.
    chain : str or None
        The chain the error is about; ``str()`` starts with "Chain '<name>'" exactly once.
    frame : int or None
        The first frame the error was met at (bakes).
    """

    def __init__(self, message: str, *, field: str | None = None, chain: str | None = None,
                 frame: int | None = None) -> None:
        self.message = message
        self.field = field
        self.chain = chain
        self.frame = frame
        super().__init__(message)

    def __str__(self) -> str:
        if self.chain is None:
            return self.message if self.frame is None else f"At frame {self.frame}: {self.message}"
        where = f"Chain '{self.chain}'" + ("" if self.frame is None else f" at frame {self.frame}")
        return f"{where}: {self.message}"

    def name_where(self, chain: str | None = None, frame: int | None = None) -> None:
        """Fill in the chain / frame where this error does not name them yet (the innermost wins)."""
        if self.chain is None:
            self.chain = chain
        if self.frame is None:
            self.frame = frame

    @classmethod
    def from_input(cls, error: IKInputError, prefix: str = "the solver refused the input",
                   chain: str | None = None) -> IKSolversError:
        """The core's refusal as a Blender-layer error, keeping its ``field``."""
        return cls(f"{prefix}: {error}.", field=error.field, chain=chain)


@contextmanager
def chain_context(chain: str | None, frame: int | None = None) -> Iterator[None]:
    """An ``IKSolversError`` raised inside names ``chain`` (and ``frame``) unless it already does.

    Entered once where a chain's work starts (its spec built, a bake's step, a live update, an
    operator, a batch): the code below raises without knowing which chain it serves. The error is
    the same object, re-raised with its traceback and cause.
    """
    try:
        yield
    except IKSolversError as error:
        error.name_where(chain, frame)
        raise


def failure_sentence(error: BaseException) -> str:
    """One sentence for the user about any failure: an ``IKSolversError``'s own, else the exception's
    type and text (operators and live mode never let a traceback reach the user)."""
    if isinstance(error, IKSolversError):
        return str(error)
    text = str(error).strip().rstrip(".") or "no details"
    return f"Unexpected {type(error).__name__} ({text}); nothing was changed."

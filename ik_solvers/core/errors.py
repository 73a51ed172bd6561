"""The core's one error type: bad input, named by the field that is wrong."""

from __future__ import annotations


class IKInputError(ValueError):
    """Raised before anything is computed when an input is invalid.

    Attributes
    ----------
    field : str
        Name of the offending argument or chain field (e.g. ``"targets"``,
        ``"lower"``), so callers such as the Blender operators can say which
        setting to fix.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field

"""llmaz argument templating: ``{{ .Var }}`` placeholders in recommended-config args.

The syntax is llmaz's, not Go templates: ``{{``, optional spaces, a mandatory leading dot, a word,
optional spaces, ``}}``. Text such as ``{{ ModelPath }}`` (no dot) is left untouched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from llmaz.api.conventions import (  # noqa: F401 (the variable names are used as templating.X)
    DRAFT_MODEL_PATH,
    INSTANCE_TYPE,
    KNOWN_VARIABLES,
    MODEL_NAME,
    MODEL_PATH,
    PLACEHOLDER,
    PP,
    TP,
)
from llmaz.render.errors import UnknownTemplateVariable


def render_args(
    args: Sequence[str],
    variables: Mapping[str, str | None],
    *,
    config: str,
    field: str,
    hints: Mapping[str, str] | None = None,
) -> list[str]:
    """Replace every placeholder in ``args``.

    :param variables: value per known variable; ``None`` or ``""`` means "has no value here".
    :param config: name of the recommended config (or recipe) the args come from, for messages.
    :param field: field path reported by errors.
    :param hints: per variable, why it has no value (appended to the error reason).
    :raises UnknownTemplateVariable: a variable is unknown or empty.
    """
    out: list[str] = []
    for index, arg in enumerate(args):

        def substitute(match: re.Match[str], index: int = index) -> str:
            var = match.group(1)
            if var not in KNOWN_VARIABLES:
                raise UnknownTemplateVariable(
                    field,
                    f"unknown template variable {{{{ .{var} }}}} in args[{index}] of config {config!r}; "
                    f"known variables: {', '.join(sorted(KNOWN_VARIABLES))}",
                    variable=var,
                    config=config,
                )
            value = variables.get(var)
            if not value:
                hint = (hints or {}).get(var)
                raise UnknownTemplateVariable(
                    field,
                    f"template variable {{{{ .{var} }}}} in args[{index}] of config {config!r} has no value"
                    + (f": {hint}" if hint else ""),
                    variable=var,
                    config=config,
                )
            return value

        out.append(PLACEHOLDER.sub(substitute, arg))
    return out

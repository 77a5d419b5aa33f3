"""Start an engine with the parallelism of the accelerators it was given (DRA mode).

With Dynamic Resource Allocation and ``firstAvailable`` subrequests the scheduler, not llmaz, picks
the flavor ("one A100, else two L4s"), so the args cannot carry the device count. A backend that
sets :attr:`llmaz.plugins.Backend.tensor_parallel_flag` gets a start wrapper: a POSIX shell script that
counts the GPU device nodes the DRA driver put into the container (``/dev/nvidia0``,
``/dev/nvidia1`` ...; ``nvidia-smi -L`` when there are none, e.g. with a driver that mounts devices
differently), then ``exec``s the engine with ``<flag> <count>`` appended. It counts what the
container can see; it does not ask the API server what was allocated.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "DEVICE_GLOB",
    "WRAPPER_NAME",
    "device_count_script",
    "strip_flag",
    "uses_flag",
    "wrap_with_device_count",
]

DEVICE_GLOB = "/dev/nvidia[0-9]*"
"""Device nodes of individual NVIDIA GPUs (``/dev/nvidiactl`` and friends do not match)."""
WRAPPER_NAME = "llmaz-device-count"
"""``$0`` of the wrapper script, shown by ``ps``."""


def device_count_script(flag: str) -> str:
    """The wrapper: count visible GPUs, then run ``"$@" <flag> <count>``."""
    return "\n".join(
        [
            f"n=$(ls -d {DEVICE_GLOB} 2>/dev/null | wc -l)",
            'if [ "$n" -lt 1 ] && command -v nvidia-smi >/dev/null 2>&1; then',
            "  n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')",
            "fi",
            'if [ "$n" -lt 1 ]; then',
            "  echo 'llmaz: no GPU is visible in this container; was the resource claim allocated?' >&2",
            "  exit 1",
            "fi",
            f'echo "llmaz: $n GPU(s) allocated, starting with {flag} $n"',
            f'exec "$@" {flag} "$n"',
        ]
    )


def _spelling(arg: str) -> str:
    """An option's name as engines compare it: ``--a_b=1`` is ``--a-b`` (vLLM and others accept
    either spelling)."""
    name = arg.split("=", 1)[0]
    return name.replace("_", "-") if name.startswith("-") else name


def uses_flag(args: Sequence[str], *spellings: str) -> bool:
    """Whether ``args`` set the option any of ``spellings`` name (``flag VALUE`` or ``flag=VALUE``,
    ``_`` for ``-`` included)."""
    names = {_spelling(s) for s in spellings}
    return any(_spelling(arg) in names for arg in args if arg.startswith("-"))


def strip_flag(args: Sequence[str], *spellings: str) -> list[str]:
    """``args`` without the option any of ``spellings`` name, as ``flag VALUE`` or ``flag=VALUE``
    (the wrapper sets it)."""
    names = {_spelling(s) for s in spellings}
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg.startswith("-") and _spelling(arg) in names:
            skip = "=" not in arg
            continue
        out.append(arg)
    return out


def wrap_with_device_count(
    command: Sequence[str], args: Sequence[str], flag: str, aliases: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    """Command and args that run ``command args`` through the device-count wrapper (which sets
    ``flag``; the args lose it and its ``aliases``)."""
    return ["/bin/sh", "-c", device_count_script(flag), WRAPPER_NAME], [
        *command,
        *strip_flag(args, flag, *aliases),
    ]

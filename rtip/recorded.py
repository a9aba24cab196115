"""One way every command turns a stack argument into the offline record, or an exit status.

`rtip plan`, `rtip images` and the like all load the stack file, run the program offline and
report the same errors the same way: a bad stack file or a program that rejects the stack is bad
input (exit 2, the message naming the stack file), an engine failure is exit 1.
"""

from __future__ import annotations

from rich.console import Console

from rtip import offline
from rtip.offline import Record
from rtip.stackfile import StackConfig, StackFileError, load

EXIT_BAD_INPUT = 2
EXIT_ENGINE = 1


def record_or_status(stack: str, err: Console) -> tuple[StackConfig, Record] | int:
    """The stack's config and offline record, or the exit status after printing why not."""
    try:
        config = load(stack)
    except StackFileError as problem:
        err.print(str(problem), markup=False)
        return EXIT_BAD_INPUT
    # The program validates and plans the stack itself (stacks.plan.load_plan), once; the record
    # carries that plan, so what is reported is exactly what the resources were built from.
    try:
        return config, offline.run(config)
    except offline.ProgramRejected as problem:
        err.print(str(problem).replace(f"stack {config.stack}: ", f"{config.source}: "), markup=False)
        return EXIT_BAD_INPUT
    except offline.EngineError as problem:
        err.print(f"{config.source}: engine: {problem}", markup=False)
        return EXIT_ENGINE


__all__ = ["EXIT_BAD_INPUT", "EXIT_ENGINE", "record_or_status"]

"""The one error type for problems a user can cause and fix."""

import difflib


class FedjouleError(Exception):
    """A bad scenario, a missing dataset, an impossible setting.

    The message says what is wrong and what to do; the CLI prints it without a
    traceback and exits with code 2.
    """


class RunDiverged(FedjouleError):
    """Training diverged: the global model or its loss became NaN/inf in some round.

    The run stopped after that round and its files (rounds.csv with `diverged` = 1 in
    that row, summary.json with `diverged_at_round` and `diverged_reason`, the plots) are
    written before this is raised; the CLI prints the message and exits with `exit_code`.
    """

    exit_code = 3


def did_you_mean(value: object, allowed) -> str:
    """` (did you mean 'lte'?)`: the allowed name closest to a misspelt `value`
    (difflib's ratio of at least 0.6), or '' when none is close or value is not text."""
    if not isinstance(value, str):
        return ""
    hint = difflib.get_close_matches(value, [str(a) for a in allowed], n=1)
    return f" (did you mean '{hint[0]}'?)" if hint else ""

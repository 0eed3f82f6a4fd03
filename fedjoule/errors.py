"""The one error type for problems a user can cause and fix."""


class FedjouleError(Exception):
    """A bad scenario, a missing dataset, an impossible setting.

    The message says what is wrong and what to do; the CLI prints it without a
    traceback and exits with code 2.
    """

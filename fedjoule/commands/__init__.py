"""The commands run, sweep, plan, capacity, validate and report as functions of typed
options returning plain results: the one layer under the command line (fedjoule/cli.py,
which parses flags and prints) and the Python API (fedjoule/api.py, which checks Python
values and reads the results back). Nothing here imports either of them.

What a command shows while it works is a view object of the command's module (a class
whose methods do nothing); the command line and the API pass their own subclasses.
"""

"""Schemathesis hooks for the CI attack (.ci/schemathesis loads them via SCHEMATHESIS_HOOKS).

They drop generated query strings whose "invalid" values cannot reach the server as invalid,
so that a failure always means the server accepted something it should refuse:

- an object as the value of a scalar parameter (`page={}`) is sent form-exploded, as its own
  keys or as nothing at all, so the server sees the parameter absent, which is valid;
- a number or boolean as `embed` (a comma-separated list of names) is sent as its text
  (`embed=0.0`), which is a valid list of one unknown name, and unknown names are ignored.

Nothing here touches checks or responses.
"""

import schemathesis


def _unsendable(name, value):
    if isinstance(value, dict):
        return True
    if isinstance(value, list) and any(isinstance(item, dict) for item in value):
        return True
    return name == "embed" and isinstance(value, (int, float, bool))


@schemathesis.hook
def filter_query(ctx, query):
    if not query:
        return True
    return not any(_unsendable(name, value) for name, value in query.items())

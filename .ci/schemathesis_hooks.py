"""schemathesis hooks for .ci/schemathesis.

GET /events/wait holds its answer until an event after `after` is committed or `timeout_s`
(default 30, at most 60) passes: a fuzzer drawing `after` at random would wait the whole timeout
on most examples. The wait is capped at 1 s here; the answer's shape is the same.
"""

import schemathesis


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    if case.operation.path != "/events/wait":
        return
    query = dict(case.query or {})
    timeout = query.get("timeout_s")
    # A value the server refuses anyway (a word, a negative) is left as drawn.
    if timeout in (None, "") or (isinstance(timeout, int) and timeout > 1):
        query["timeout_s"] = 1
    case.query = query

"""The ceiling for API benchmarks: a bare Sanic JSON handler, one worker."""

from __future__ import annotations

import sys

from sanic import Sanic, json

app = Sanic("bare")


@app.get("/")
async def bare(request):
    """Answer a fixed small JSON document."""
    return json({"data": {"status": "ok"}, "meta": {"requestId": "req_bare"}})


if __name__ == "__main__":
    app.run(host="127.0.0.1", port=int(sys.argv[1]), single_process=True, access_log=False, motd=False)

"""The OpenAPI document, the docs page, and docs/api.md agree with the code."""

from __future__ import annotations

import re

from api.app import all_endpoints
from api.errors import ERROR_CODES
from tests.support import REPO_ROOT


async def test_openapi_lists_every_endpoint_with_models(client):
    r = await client.get("/v1/openapi.json")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    doc = r.json()
    assert doc["openapi"].startswith("3.1")
    for endpoint in all_endpoints():
        op = doc["paths"][endpoint.path][endpoint.method.lower()]
        assert str(endpoint.status) in op["responses"]
        if endpoint.body is not None:
            schema = op["requestBody"]["content"]["application/json"]["schema"]
            name = schema["$ref"].rsplit("/", 1)[1]
            assert name in doc["components"]["schemas"]
            assert doc["components"]["schemas"][name].get("additionalProperties") is False
        for status, response in op["responses"].items():
            if status >= "400":
                codes = response["content"]["application/json"]["schema"]["properties"]["error"]["properties"]["code"][
                    "enum"
                ]
                assert all(ERROR_CODES[c][0] == int(status) for c in codes)


async def test_docs_page_is_html_and_names_every_path(client):
    r = await client.get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    for endpoint in all_endpoints():
        assert endpoint.path in r.text
    for code in ERROR_CODES:
        assert code in r.text


def test_docs_api_md_error_table_matches_the_code():
    text = (REPO_ROOT / "docs" / "api.md").read_text()
    table = dict(re.findall(r"^\| `([A-Z]+_\d{3})` \| (\d{3}) \|", text, flags=re.M))
    assert table == {code: str(status) for code, (status, _) in ERROR_CODES.items()}

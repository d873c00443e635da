"""The OpenAPI document: valid OpenAPI 3.1, served on both prefixes, listing exactly the routes the
app serves (read from Litestar's route table), each with an operationId, its request body, a
success response with a schema, and the error responses it can give."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis

from entrypoints.http.asgi import API_PREFIX
from entrypoints.http.routing import AuthMode
from tests.http.route_table import ServedOperation, served_operations
from tests.support.apps import Api

Document = dict[str, Any]
AUTH_ENVELOPE = "#/components/schemas/AuthErrorEnvelope"
ROUTER_ENVELOPE = "#/components/schemas/ErrorEnvelope"


@pytest.fixture
async def document(api: Api) -> Document:
    response = await api.client.get("/v2/openapi.json")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    return response.json()  # type: ignore[no-any-return]


@pytest.fixture
def served(api: Api) -> list[ServedOperation]:
    operations = served_operations(api.client.app)
    assert len(operations) >= 20, "the route table is smaller than the foundation"
    return operations


def _operation(document: Document, op: ServedOperation) -> Document:
    item = document["paths"].get(op.documented_path)
    assert item is not None, f"{op.label}: path missing from the OpenAPI document"
    operation = item.get(op.method.lower())
    assert operation is not None, f"{op.label}: method missing from the OpenAPI document"
    return operation  # type: ignore[no-any-return]


def _schema_ref(response: Document) -> str | None:
    schema = response.get("content", {}).get("application/json", {}).get("schema", {})
    return schema.get("$ref")  # type: ignore[no-any-return]


def _resolve(document: Document, ref: str) -> Document:
    node: Any = document
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node  # type: ignore[no-any-return]


async def test_document_is_openapi_3_1_version_2_with_both_servers_and_bearer_auth(api: Api,
                                                                                 document: Document) -> None:
    assert document["openapi"].startswith("3.1")
    assert document["info"]["version"] == "2.0.0"
    assert [server["url"] for server in document["servers"]] == ["/v2", "/api/v2"]
    assert document["components"]["securitySchemes"]["BearerAuth"] == {
        "type": "http", "scheme": "bearer", "bearerFormat": "parley_sk_..."}
    session = document["components"]["securitySchemes"]["SessionCookie"]
    assert (session["type"], session["in"], session["name"]) == ("apiKey", "cookie", "parley_session")
    widget = document["components"]["securitySchemes"]["WidgetAuth"]
    assert (widget["type"], widget["scheme"]) == ("http", "widget")
    assert not [p for p in document["paths"] if p.startswith(("/v2/", "/api/v2/"))], "paths are relative"
    schemathesis.openapi.from_dict(document).validate()  # against the OpenAPI 3.1 meta-schema

    dashboard = await api.client.get("/api/v2/openapi.json")
    assert dashboard.status_code == 200 and dashboard.json() == document


async def test_every_served_route_is_documented_and_nothing_else(document: Document,
                                                                served: list[ServedOperation]) -> None:
    assert all(op.route.path.startswith(API_PREFIX) for op in served), "every route lives under the API prefix"
    for op in served:
        _operation(document, op)
    documented = {(method.upper(), path) for path, item in document["paths"].items()
                  for method in item if method in ("get", "post", "put", "patch", "delete")}
    assert documented == {(op.method, op.documented_path) for op in served}


async def test_every_operation_has_a_unique_operation_id(document: Document, served: list[ServedOperation]) -> None:
    ids = [_operation(document, op).get("operationId") for op in served]
    assert all(ids), [op.label for op, i in zip(served, ids, strict=True) if not i]
    assert len(set(ids)) == len(ids), "operationIds are unique"


async def test_request_bodies_are_documented_exactly_where_a_route_reads_one(
        document: Document, served: list[ServedOperation]) -> None:
    for op in served:
        operation = _operation(document, op)
        if op.has_body:
            content = operation.get("requestBody", {}).get("content", {})
            assert content, f"{op.label}: request body not documented"
            media = content.get("application/json") or content.get("multipart/form-data")
            assert media and media.get("schema"), f"{op.label}: request body without a schema"
        else:
            assert "requestBody" not in operation, f"{op.label}: documents a body it never reads"


def _success(operation: Document) -> tuple[int, Document]:
    found = sorted((int(s), r) for s, r in operation["responses"].items() if 200 <= int(s) < 400)
    if len(found) == 2 and [s for s, _ in found] == [200, 201] and _schema_ref(found[0][1]) == _schema_ref(
            found[1][1]):
        return found[1]  # a create that may answer with the resource it has already (POST /leads): one body
    return found[0] if len(found) == 1 else (0, {})


async def test_every_operation_documents_its_success_response(document: Document,
                                                             served: list[ServedOperation]) -> None:
    problems = []
    for op in served:
        operation = _operation(document, op)
        status, response = _success(operation)
        if not status:
            problems.append(f"{op.label}: exactly one success status")
        elif status == 204:
            if "content" in response:
                problems.append(f"{op.label}: a 204 has no body")
        elif status in (301, 302, 303, 307, 308):
            if "location" not in {h.lower() for h in response.get("headers", {})}:
                problems.append(f"{op.label}: a redirect documents its Location header")
        else:
            content = response.get("content", {})
            if not content or not all(media.get("schema") for media in content.values()):
                problems.append(f"{op.label}: {status} response without a schema")
            elif "application/json" in content and op.documented_path != "/openapi.json":
                ref = _schema_ref(response)
                if not ref or not _resolve(document, ref)["properties"].keys() >= {"success", "data"}:
                    problems.append(f"{op.label}: JSON success responses use the {{success, data}} envelope")
    assert not problems, "\n".join(problems)


async def test_every_route_documents_the_errors_it_can_give(document: Document,
                                                            served: list[ServedOperation]) -> None:
    problems = []
    for op in served:
        access = op.access
        if access is None:
            problems.append(f"{op.label}: declared without endpoint(...)")
            continue
        operation = _operation(document, op)
        responses = operation["responses"]
        expected = {400}  # on every route: a NUL in the path or query string is refused before routing
        if not access.public:
            expected |= {401, 403, 429}
            security = [{"BearerAuth": []}]
            if access.auth is AuthMode.KEY_OR_SESSION:  # either a key or a dashboard session
                security.append({"SessionCookie": []})
            if access.auth is AuthMode.WIDGET:  # a widget token, never a Bearer key
                security = [{"WidgetAuth": []}]
            elif access.auth is AuthMode.SESSION:  # a dashboard session only
                security = [{"SessionCookie": []}]
            if operation.get("security") != security:
                problems.append(f"{op.label}: documents the security requirements {security}")
        elif operation.get("security") != []:
            problems.append(f"{op.label}: a public route says it needs no credential (security: [])")
        if op.route.path_parameters:
            expected.add(404)
        if op.has_body:
            expected |= {413, 415}
        if access.idempotent:
            expected |= {409, 422}
        documented = {int(s) for s in responses if int(s) >= 400}
        if not expected <= documented:
            problems.append(f"{op.label}: undocumented errors {sorted(expected - documented)}")
        for status in sorted(documented):
            response = responses[str(status)]
            want = AUTH_ENVELOPE if status in (401, 429) else ROUTER_ENVELOPE
            if not response.get("description"):
                problems.append(f"{op.label}: {status} needs a description")
            if status == 429 and op.label in ("POST /widget/contacts", "POST /widget/web-calls"):
                continue  # either envelope: test_a_429_of_a_domain_cap_documents_both_error_bodies
            if _schema_ref(response) != want:
                problems.append(f"{op.label}: {status} answers in {want.rsplit('/', 1)[-1]}")
    assert not problems, "\n".join(problems)


async def test_list_operations_page_with_limit_and_offset(document: Document, served: list[ServedOperation]) -> None:
    """A list is a JSON success body with ``meta``: it pages with limit 1-100 (25) and a bounded offset (0)."""
    problems, lists = [], 0
    for op in served:
        operation = _operation(document, op)
        ref = _schema_ref(_success(operation)[1]) or ""
        if not ref or "meta" not in _resolve(document, ref).get("properties", {}):
            continue
        lists += 1
        if op.method != "GET":
            problems.append(f"{op.label}: only GET lists")
        if not set(_resolve(document, ref).get("required", [])) >= {"data", "meta"}:
            problems.append(f"{op.label}: data and meta are required")
        params = {p["name"]: p["schema"] for p in operation.get("parameters", []) if p["in"] == "query"}
        limit, offset = params.get("limit", {}), params.get("offset", {})
        if (limit.get("minimum"), limit.get("maximum"), limit.get("default")) != (1, 100, 25):
            problems.append(f"{op.label}: limit is 1-100, default 25")
        if (offset.get("minimum"), offset.get("default")) != (0, 0):
            problems.append(f"{op.label}: offset is >= 0, default 0")
        if "maximum" not in offset:
            problems.append(f"{op.label}: offset needs an upper bound, or a huge one overflows the SQL integer "
                            "(use entrypoints.http.routing.Offset)")
    assert lists >= 3
    assert not problems, "\n".join(problems)


async def test_meta_endpoints_are_public(document: Document) -> None:
    for path in ("/health", "/openapi.json", "/docs"):
        operation = document["paths"][path]["get"]
        assert not operation.get("security"), path
        assert not any(s in operation["responses"] for s in ("401", "403")), path
    assert "302" in document["paths"]["/docs"]["get"]["responses"]


RATE_LIMIT_HEADERS = ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")


def _header(document: Document, header: Document) -> Document:
    return _resolve(document, header["$ref"]) if "$ref" in header else header


def _required_headers(document: Document, response: Document) -> set[str]:
    return {name for name, header in response.get("headers", {}).items() if _header(document, header).get("required")}


async def test_every_response_documents_the_headers_the_pipeline_adds(document: Document,
                                                                      served: list[ServedOperation]) -> None:
    """X-Request-Id and X-Content-Type-Options on every response; the rate-limit headers on every response of
    an authenticated operation but 401 (required but on 400 and 404, which a malformed URL gets before
    routing); Retry-After on 429; Cache-Control exactly on the operations whose response carries a secret
    (required but on 400 and 404); Location on the 201 of an operation that creates an addressable resource;
    X-Sub-Org-Id (parameter) on every authenticated operation; Idempotency-Key (parameter) and
    Idempotency-Replayed (response header) exactly on the operations that honour the key."""
    problems = []
    for op in served:
        access = op.access
        assert access is not None
        operation = _operation(document, op)
        for status, response in operation["responses"].items():
            required = _required_headers(document, response)
            expected = {"X-Request-Id", "X-Content-Type-Options"}
            if not access.public and status not in ("401", "400", "404"):  # 400, 404: also before routing
                expected |= set(RATE_LIMIT_HEADERS)
            if access.secret and status not in ("400", "404"):
                expected.add("Cache-Control")
            if access.secret != ("Cache-Control" in response.get("headers", {})):
                problems.append(f"{op.label} {status}: Cache-Control documented exactly where a secret is sent")
            if not access.public and status != "401" and not set(RATE_LIMIT_HEADERS) <= set(
                    response.get("headers", {})):
                problems.append(f"{op.label} {status}: the rate-limit headers are documented")
            if status == "429":
                expected.add("Retry-After")
            if (status == "201" and access.location) or status.startswith("3"):  # a redirect says where
                expected.add("Location")
            if required != expected:
                problems.append(f"{op.label} {status}: required headers {sorted(required)}, not {sorted(expected)}")
            replayed = "Idempotency-Replayed" in response.get("headers", {})
            if access.idempotent and status.startswith("2") and not replayed:
                problems.append(f"{op.label} {status}: a replay is marked Idempotency-Replayed")
            if not access.idempotent and replayed:
                problems.append(f"{op.label} {status}: Idempotency-Replayed on an operation without keys")
        sub_org = [p for p in operation.get("parameters", []) if p["name"] == "X-Sub-Org-Id"]
        if bool(sub_org) == access.public:
            problems.append(f"{op.label}: X-Sub-Org-Id documented {bool(sub_org)}, authenticated {not access.public}")
        elif sub_org and (sub_org[0]["in"] != "header" or sub_org[0]["required"]
                          or sub_org[0]["schema"].get("type") != "integer" or not sub_org[0].get("description")):
            problems.append(f"{op.label}: X-Sub-Org-Id is an optional integer header with a description")
        keyed = [p for p in operation.get("parameters", []) if p["name"] == "Idempotency-Key"]
        if bool(keyed) != access.idempotent:
            problems.append(f"{op.label}: Idempotency-Key documented {bool(keyed)}, honoured {access.idempotent}")
        elif keyed and (keyed[0]["in"], keyed[0]["schema"].get("maxLength")) != ("header", 255):
            problems.append(f"{op.label}: Idempotency-Key is a header of at most 255 characters")
    assert not problems, "\n".join(problems)


def _object_schemas(document: Document, schema: Document, seen: set[str]) -> list[tuple[str, Document]]:
    """The object schemas a request body can contain, following $ref, oneOf/anyOf, items and properties."""
    found: list[tuple[str, Document]] = []
    if "$ref" in schema:
        if schema["$ref"] in seen:
            return found
        seen.add(schema["$ref"])
        target = _resolve(document, schema["$ref"])
        if target.get("type") == "object" and "properties" in target:
            found.append((schema["$ref"].rsplit("/", 1)[-1], target))
        return found + _object_schemas(document, target, seen)
    for key in ("oneOf", "anyOf", "allOf"):
        for option in schema.get(key, []):
            found += _object_schemas(document, option, seen)
    if isinstance(schema.get("items"), dict):
        found += _object_schemas(document, schema["items"], seen)
    for value in schema.get("properties", {}).values():
        found += _object_schemas(document, value, seen)
    return found


async def test_request_bodies_say_unknown_fields_are_refused(document: Document,
                                                              served: list[ServedOperation]) -> None:
    problems, bodies = [], 0
    for op in served:
        content = _operation(document, op).get("requestBody", {}).get("content", {})
        for media in content.values():
            bodies += 1
            for name, schema in _object_schemas(document, media["schema"], set()):
                if schema.get("additionalProperties") is not False:
                    problems.append(f"{op.label}: {name} refuses unknown fields (400) but does not say so")
    assert bodies >= 20
    assert not problems, "\n".join(problems)


async def test_an_unknown_body_field_is_refused_as_documented(api: Api) -> None:
    tenant = await api.tenant()
    response = await api.client.post("/v2/scheduling/calendars", headers=tenant.headers,
                                     json={"name": "Desk", "timezone": "UTC", "colour": "blue"})
    assert response.status_code == 400, response.text
    assert "colour" in response.text
    assert response.headers["x-ratelimit-limit"] and response.headers["x-request-id"]


# 201s that create several resources at once: nothing single to point a Location at
BATCH_CREATES = {"POST /dnc/lists/{id}/entries", "POST /dnc/lists/{id}/entries/import",
                 "POST /knowledge-bases/{id}/documents", "POST /campaigns/{id}/contacts",
                 "POST /campaigns/{id}/contacts/import"}
# a widget token is not stored (it has no URL), and a widget's contact is read only through the campaign's
# API-key routes, which the widget token cannot open
NOT_ADDRESSABLE = {"POST /widget/tokens", "POST /widget/contacts", "POST /widget/web-calls"}


async def test_every_201_that_creates_a_resource_names_its_location(served: list[ServedOperation]) -> None:
    missing = [op.label for op in served if op.handler.status_code == 201
               and op.label not in BATCH_CREATES | NOT_ADDRESSABLE and not (op.access and op.access.location)]
    assert not missing, f"201 without a Location template: {missing}"


# -- what generated clients need (openapi-python-client reads the document as it is) ----------------------


def _walk(node: Any, path: str = "") -> list[tuple[str, Document]]:
    found: list[tuple[str, Document]] = []
    if isinstance(node, dict):
        found.append((path, node))
        for key, value in node.items():
            found += _walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _walk(value, f"{path}/{index}")
    return found


async def test_no_two_schemas_share_a_title_and_no_one_of_has_one_member(document: Document) -> None:
    titles = [schema.get("title") for schema in document["components"]["schemas"].values() if schema.get("title")]
    assert len(titles) == len(set(titles)), sorted(t for t in titles if titles.count(t) > 1)
    assert {"CampaignStatsOut", "CallStatsOut"} <= set(titles)
    single = [path for path, node in _walk(document) if isinstance(node.get("oneOf"), list) and len(node["oneOf"]) < 2]
    assert not single, single[:10]


async def test_bounds_of_zero_are_kept(document: Document) -> None:
    schemas = document["components"]["schemas"]
    for name, field, bounds in [("CalendarUpdate", "buffer_minutes", (0, 240)),
                                ("CalendarUpdate", "min_notice_minutes", (0, 43200)),
                                ("CalendarCreate", "buffer_minutes", (0, 240)),
                                ("LlmPatch", "temperature", (0, 2)), ("LlmSchema", "temperature", (0, 2))]:
        prop = schemas[name]["properties"][field]
        assert (prop.get("minimum"), prop.get("maximum")) == bounds, (name, field, prop)
    expires = next(p for p in document["paths"]["/recordings/{file}"]["get"]["parameters"] if p["name"] == "expires")
    assert expires["schema"]["minimum"] == 0 and expires["schema"]["type"] == "integer", expires


async def test_usage_metrics_documents_its_required_typed_parameters(document: Document) -> None:
    parameters = {p["name"]: p for p in document["paths"]["/usage/metrics"]["get"]["parameters"]}
    for name in ("metric", "start", "end"):
        assert parameters[name]["required"] is True, parameters[name]
        assert parameters[name]["schema"]["type"] == "string", parameters[name]
    assert set(parameters["metric"]["schema"]["enum"]) == {"call_minutes", "calls", "sms_segments"}
    granularity = parameters["granularity"]
    assert granularity["required"] is False and granularity["schema"]["default"] == "day", granularity
    assert granularity["schema"]["enum"] == ["day", "hour"], granularity


async def test_query_parameters_are_never_null_and_instants_say_date_time(document: Document) -> None:
    problems = [f"{path} {p['name']}" for path, item in document["paths"].items() for operation in item.values()
                if isinstance(operation, dict) for p in operation.get("parameters", [])
                if p["in"] == "query" and "null" in str(p["schema"].get("type"))
                + str([m.get("type") for m in p["schema"].get("oneOf", [])])]
    assert not problems, problems
    instants = {("/calls", "created_after"), ("/calls", "created_before"), ("/call-logs", "start"),
                ("/call-logs", "end"), ("/leads", "created_after"), ("/sms", "created_before"),
                ("/telephony/stats", "start"), ("/telephony/stats", "end"), ("/scheduling/appointments", "start"),
                ("/scheduling/calendars/{id}/blackouts", "end"), ("/schedules/{id}/status", "at")}
    for path, name in instants:
        parameter = next(p for p in document["paths"][path]["get"]["parameters"] if p["name"] == name)
        assert parameter["schema"] == {**parameter["schema"], "type": "string", "format": "date-time"}, parameter


async def test_optional_bodies_are_not_required(document: Document) -> None:
    for path in ("/agents/{id}/duplicate", "/api-keys/{id}/rotate", "/webhooks/{id}/rotate-secret"):
        body = document["paths"][path]["post"]["requestBody"]
        assert body["required"] is False, path
        assert "$ref" in body["content"]["application/json"]["schema"], body


async def test_csv_imports_and_uploads_document_their_multipart_files(document: Document) -> None:
    for path, field in (("/campaigns/{id}/contacts/import", "file"), ("/dnc/lists/{id}/entries/import", "file"),
                        ("/knowledge-bases/{id}/documents", "files")):
        body = document["paths"][path]["post"]["requestBody"]
        schema = _resolve(document, body["content"]["multipart/form-data"]["schema"]["$ref"])
        prop = schema["properties"][field]
        assert (prop.get("items") or prop)["format"] == "binary", (path, prop)
        assert schema["additionalProperties"] is False
    csv = _resolve(document, "#/components/schemas/CsvUpload")
    assert csv["required"] == ["file"]


async def test_the_recording_download_is_described_as_wav_bytes(document: Document) -> None:
    ok = document["paths"]["/recordings/{file}"]["get"]["responses"]["200"]
    assert ok["content"] == {"audio/wav": {"schema": {"type": "string", "format": "binary"}}}


async def test_response_headers_are_defined_once_and_referenced(api: Api, document: Document) -> None:
    headers = document["components"]["headers"]
    inline = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            for status, response in operation.get("responses", {}).items() if isinstance(operation, dict) else ():
                for name, header in response.get("headers", {}).items():
                    if set(header) != {"$ref"}:
                        inline.append(f"{method.upper()} {path} {status} {name}")
                    else:
                        assert header["$ref"].removeprefix("#/components/headers/") in headers
    assert not inline, inline[:10]
    assert headers["X-Request-Id.required"]["required"] is True
    assert "required" not in headers["X-RateLimit-Limit"]
    size = len((await api.client.get("/v2/openapi.json")).content)
    operations = sum(1 for item in document["paths"].values() for op in item.values() if isinstance(op, dict))
    # about 6.9 KB an operation with the headers referenced; with them inline the document was 1.36 MB when it was
    # 1.15 MB referenced, about 18 % more
    assert size / operations < 7_500, f"the document is {size} bytes for {operations} operations"


async def test_a_429_of_a_domain_cap_documents_both_error_bodies(document: Document) -> None:
    """The widget's intake caps answer 429 in the router envelope (``widget_intake_limited`` with details), the
    token's rate limit in the auth envelope: the document allows either."""
    body = document["paths"]["/widget/contacts"]["post"]["responses"]["429"]["content"]["application/json"]["schema"]
    members = {item["$ref"].rsplit("/", 1)[1] for item in body["oneOf"]}
    assert members == {"AuthErrorEnvelope", "ErrorEnvelope"}
    rate_limited = document["paths"]["/agents"]["get"]["responses"]["429"]["content"]["application/json"]["schema"]
    assert rate_limited["$ref"].endswith("/AuthErrorEnvelope")

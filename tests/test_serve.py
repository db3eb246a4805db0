"""graphctx serve, on a real server on 127.0.0.1 (one per module): the answer equals ``graphctx answer``'s,
the pool follows adds, edits and deletes (persisted, and retrieval equals a rebuild's), keys and limits
refuse bad requests with one clear message, and nothing a client sends breaks the server or the pool:
malformed, fuzzed (Hypothesis, tests/test_serve_requests.py's requests), chunked over the limit, stalled
(408 within the body timeout); the page carries its CSP and runs in headless Chromium without a CSP
violation, showing a stored script as text."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from urllib.parse import quote

import httpx
import pytest
from evaluation_workspace import write_workspace
from hypothesis import given, settings
from hypothesis import strategies as st
from test_serve_requests import in_digits, malformed_requests

from graphctx.cli import main as cli_main
from graphctx.serve.headers import page_policy
from graphctx.serve.requests import Limits

pytestmark = pytest.mark.slow

KEY = "test-key-123"
QUESTION = "How do I delegate my ADA to a stake pool from Daedalus?"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory, cardano_dir, tiny_bert):
    """A running ``graphctx serve`` on the tiny workspace (3 new tokens, GraphContextGen, the rtr
    attribution); yields (base
    URL, config path, pool folder); stopped at the module's end."""
    root = tmp_path_factory.mktemp("serve")
    generation = {"max_new_tokens": 3, "batch_size": 1, "max_prompt_tokens": 320}
    evaluation = {"output_dir": str(root / "out"), "limit": 1, "attribution": [{"class_path": "rtr"}]}
    config = write_workspace(root, cardano_dir, tiny_bert, "serve.yaml", evaluation, generation=generation)
    port = free_port()
    pool_dir = root / "pool"
    argv = [sys.executable, "-m", "graphctx.cli", "serve", "--config", str(config), "--port", str(port)]
    argv += ["--pool-dir", str(pool_dir), "--max-question-tokens", "200", "--max-batch-size", "4"]
    argv += ["--batch-timeout", "0.05"]
    env = {**os.environ, "GRAPHCTX_API_KEY": KEY}
    log = open(root / "server.log", "w")  # noqa: SIM115 - the server's whole life
    server = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            assert server.poll() is None, (root / "server.log").read_text()[-3000:]
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(1)
        else:
            raise AssertionError("the server did not start in 600 s")
        yield url, config, pool_dir
    finally:
        server.terminate()  # graphctx serve ends LitServe's processes on SIGTERM
        try:
            server.wait(timeout=30)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)  # whatever is left of its process group
        log.close()


def ask(url: str, question: str, **extra) -> httpx.Response:
    return httpx.post(f"{url}/v1/answer", json={"question": question, **extra}, timeout=300)


def test_served_answer_equals_graphctx_answer(served, capsys):
    url, config, _ = served
    response = ask(url, QUESTION)
    assert response.status_code == 200, response.text
    served_answer = response.json()
    capsys.readouterr()
    assert cli_main(["answer", "--config", str(config), "--question", QUESTION, "--json"]) == 0
    answered = json.loads(capsys.readouterr().out)
    assert served_answer["answer"] == answered["answer"]
    assert served_answer["context"] == answered["context"]
    assert [hit["id"] for hit in served_answer["hits"]] == [hit["id"] for hit in answered["hits"]]
    assert [hit["score"] for hit in served_answer["hits"]] == [hit["score"] for hit in answered["hits"]]
    first = served_answer["hits"][0]
    assert first["link"] == f"https://cardano.stackexchange.com/q/{first['id']}"
    # the answer's attribution (evaluation.attribution: rtr, no citation marks: the top pair shown), judged
    # by the configured AutoAIS judge, as graphctx answer gives it
    assert served_answer["attributions"] == answered["attributions"]
    (cited,) = served_answer["attributions"]
    assert cited["architecture"] == "rtr" and cited["passage"] == f"post:{first['id']}"
    assert cited["link"] == first["link"] and 0.0 <= cited["probability"] <= 1.0
    stages = {"retrieval_and_kg_ms", "prompt_ms", "generation_ms", "attribution_ms", "total_ms", "batch"}
    assert set(served_answer["timings"]) == stages
    assert served_answer["kg_sentences"] or served_answer["kg_facts"] == []


def test_concurrent_requests_get_the_answers_they_get_alone(served):
    """Three questions at once (LitServe batches them, ``timings.batch`` says how many went together):
    each answer is the one the question gets alone (the test config decodes one prompt at a time)."""
    from concurrent.futures import ThreadPoolExecutor

    url, _, _ = served
    questions = [QUESTION, "Why is my transaction pending?", "How long is an epoch?"]
    with ThreadPoolExecutor(3) as pool:
        together = list(pool.map(lambda q: ask(url, q), questions))
    alone = [ask(url, question) for question in questions]
    assert all(response.status_code == 200 for response in together + alone)
    assert [r.json()["answer"] for r in together] == [r.json()["answer"] for r in alone]
    # the query encoder embeds a batch's questions together: its last bits follow the batch (padding), so
    # the same pool questions come back with scores equal to rounding
    for batched, single in zip(together, alone, strict=True):
        assert [hit["id"] for hit in batched.json()["hits"]] == [hit["id"] for hit in single.json()["hits"]]
        scores = [[hit["score"] for hit in r.json()["hits"]] for r in (batched, single)]
        assert scores[0] == pytest.approx(scores[1], rel=1e-5)
    assert all(1 <= r.json()["timings"]["batch"] <= 3 for r in together)


def write(url: str, method: str, path: str, key: str | None = KEY, **options) -> httpx.Response:
    headers = {"X-API-Key": key} if key else {}
    return httpx.request(method, f"{url}{path}", headers=headers, timeout=300, **options)


def test_pool_follows_adds_edits_deletes_and_equals_a_rebuild(served):
    """Add two questions (one with its accepted answer), edit one, delete a pool question: each persisted
    (the pool file), retrieval over the result equals a rebuild's, and the next answer retrieves them."""
    import torch

    from graphctx.pipeline.config_file import load_config
    from graphctx.retrieval.index import build_index
    from graphctx.retrieval.retriever import build_retriever

    url, config, pool_dir = served
    rows = [json.loads(line) for line in (pool_dir / "pool.jsonl").read_text().splitlines()]
    first, second = rows[0]["id"], rows[1]["id"]
    added = {"id": 10**9, "question": QUESTION + " (edited later)", "answer": "Use the Delegation Center."}
    assert write(url, "POST", "/v1/questions", json=added).status_code == 200
    other = {"id": 10**9 + 1, "question": "Which stake pool ticker should I pick for delegation?"}
    assert write(url, "POST", "/v1/questions", json=other).status_code == 200
    edited = write(url, "PUT", f"/v1/questions/{10**9}", json={"question": QUESTION + " with Yoroi"})
    assert edited.status_code == 200 and edited.json()["edited"] == [10**9]
    assert write(url, "DELETE", f"/v1/questions/{first}").status_code == 200
    assert (
        write(url, "PUT", f"/v1/questions/{second}", json={"answer": "a new accepted answer"}).status_code
        == 200
    )

    rows = [json.loads(line) for line in (pool_dir / "pool.jsonl").read_text().splitlines()]
    by_id = {row["id"]: row for row in rows}
    assert first not in by_id and by_id[10**9]["question"] == QUESTION + " with Yoroi"
    assert by_id[10**9]["answer"] == "Use the Delegation Center." and by_id[10**9 + 1]["answer"] == ""
    assert by_id[second]["answer"] == "a new accepted answer"

    settings = load_config(config).retrieval
    ids, texts = [row["id"] for row in rows], [row["question"] for row in rows]
    live = build_index(ids, texts, settings, load_config(config).cache_dir)  # the entry the updates wrote
    rebuilt = build_index(ids, texts, settings, pool_dir.parent / "fresh-cache")
    assert torch.equal(live.graph.edge_index, rebuilt.graph.edge_index)
    assert torch.allclose(live.embeddings, rebuilt.embeddings, atol=1e-6)
    queries = [QUESTION, "Which ticker should I delegate to?"]
    hits = [
        [[h.id for h in row] for row in build_retriever(i, settings).retrieve(queries)]
        for i in (live, rebuilt)
    ]
    assert hits[0] == hits[1]

    response = ask(url, QUESTION + " with Yoroi")
    assert response.status_code == 200
    assert response.json()["hits"][0]["id"] == 10**9  # the worker sees the committed pool


@pytest.mark.parametrize(
    ("method", "path", "options", "key", "status", "message"),
    [
        (
            "POST",
            "/v1/questions",
            {"json": {"id": 5, "question": "q"}},
            None,
            401,
            "missing or wrong API key",
        ),
        ("POST", "/v1/questions", {"json": {"id": 5, "question": "q"}}, "wrong", 401, "wrong API key"),
        ("DELETE", "/v1/questions/123456789012", {}, KEY, 404, "question 123456789012 is not in the pool"),
        ("DELETE", "/v1/questions/-3", {}, KEY, 400, "question id must be a positive integer"),
        ("POST", "/v1/questions", {"json": {"id": "x", "question": "q"}}, KEY, 400, "positive integer"),
        ("POST", "/v1/questions", {"json": {"id": 7, "question": "  "}}, KEY, 400, "'question' is empty"),
        ("PUT", "/v1/questions/10", {"json": {"title": "t"}}, KEY, 400, "unknown field 'title' for edit"),
        (
            "POST",
            "/v1/questions",
            {"content": b'{"id": 12, "question": "How do I stake?", "answer": "\\ud800"}'},
            KEY,
            400,
            "'answer' holds a NUL or an unpaired surrogate",
        ),
        (
            "POST",
            "/v1/questions",
            {"content": b'{"id": 12, "question": "How?", "question": "Why?"}'},
            KEY,
            400,
            "duplicate key 'question'",
        ),
        (
            "POST",
            "/v1/questions",
            {"content": b'{"id": 1' + b"0" * 5000 + b', "question": "How?"}'},
            KEY,
            400,
            "5001-digit integer",
        ),
        ("DELETE", "/v1/questions/%C2%B2", {}, KEY, 400, "not '²'"),  # superscript two: isdigit, not int()
        ("DELETE", "/v1/questions/123456789012", {}, None, 401, "missing or wrong API key"),
    ],
)
def test_bad_writes_get_one_clear_4xx(served, method, path, options, key, status, message):
    url, _, pool_dir = served
    before = (pool_dir / "pool.jsonl").read_bytes()
    response = write(url, method, path, key, **options)
    assert response.status_code == status and message in response.json()["detail"]
    assert (pool_dir / "pool.jsonl").read_bytes() == before


@pytest.mark.parametrize(
    ("content", "status", "message"),
    [
        (b'{"question": ""}', 400, "'question' is empty"),
        (b'{"question": "   \\n"}', 400, "'question' is empty"),
        (b'{"question": 5}', 400, "'question' must be a string"),
        (b'{"question": "\xff\xfe how"}', 400, "request body is not UTF-8"),
        (b'{"question": "ok", "variant": "Nope"}', 400, "unknown variant 'Nope'"),
        (b'{"question": "a' + b"a" * 9000 + b'"}', 400, "over the limit of 8000"),
        (b'{"question": "' + b"stake pool " * 300 + b'"}', 400, "tokens, over the limit of 200"),
        (b'{"question": "a' + b"a" * 70000 + b'"}', 413, "over the limit of 65536"),
        (b"[1, 2]", 400, "must be a JSON object"),
        (b'{"question": "x"', 400, "request body is not JSON"),
        (b'{"question": "\\ud800"}', 400, "unpaired surrogate"),
        (b'{"question": "ok", "\\udc00": 1}', 400, "field name '\\udc00' holds"),
        (b'{"question": ' + b"[" * 30000 + b"]" * 30000 + b"}", 400, "nests arrays or objects too deep"),
        (b'{"question": "ok", "variant": ["GraphContextGen"]}', 400, "'variant' is an array"),
        (b'{"question": "ok", "variant": 5}', 400, "'variant' must be a string"),
        (b'{"question": "a", "question": "b"}', 400, "duplicate key 'question'"),
    ],
)
def test_bad_questions_get_one_clear_4xx_and_the_server_keeps_answering(served, content, status, message):
    url, _, _ = served
    response = httpx.post(
        f"{url}/v1/answer", content=content, headers={"Content-Type": "application/json"}, timeout=60
    )
    assert response.status_code == status, response.text
    assert message in response.json()["detail"]
    assert httpx.get(f"{url}/health", timeout=10).status_code == 200


def test_a_form_body_gets_415(served):
    """LitServe reads a form body as a form: only JSON (or no Content-Type) is taken."""
    url, _, _ = served
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    response = httpx.post(f"{url}/v1/answer", content=b'{"question": "ok"}', headers=headers, timeout=60)
    assert response.status_code == 415 and "must be application/json" in response.json()["detail"]


def existing_ids(pool_dir) -> list[int]:
    return [json.loads(line)["id"] for line in (pool_dir / "pool.jsonl").read_text().splitlines()[:3]]


def test_ids_in_other_digits_never_reach_a_question(served):
    """A pool question's id in Arabic-Indic or fullwidth digits (which ``int()`` reads as that id) is
    refused, in the path or the body: no edit, no delete, no 409."""
    url, _, pool_dir = served
    before = (pool_dir / "pool.jsonl").read_bytes()
    qid = existing_ids(pool_dir)[0]
    for zero in ("\u0660", "\uff10", "\u0966"):  # Arabic-Indic, fullwidth, Devanagari
        other = in_digits(qid, zero)
        edit = write(url, "PUT", f"/v1/questions/{quote(other)}", json={"answer": "overwritten"})
        assert edit.status_code == 400 and "question id must be a positive integer" in edit.json()["detail"]
        assert write(url, "DELETE", f"/v1/questions/{quote(other)}").status_code == 400
        add = write(url, "POST", "/v1/questions", json={"id": other, "question": "How do I stake?"})
        assert add.status_code == 400 and "'id' must be a positive integer" in add.json()["detail"]
    assert (pool_dir / "pool.jsonl").read_bytes() == before


def test_a_lower_case_bearer_scheme_is_accepted(served):
    """RFC 7235: the auth scheme is case-insensitive (the key is then checked: 404 for an unknown id)."""
    url, _, _ = served
    for scheme in ("bearer", "BEARER", "Bearer"):
        headers = {"Authorization": f"{scheme} {KEY}"}
        response = httpx.delete(f"{url}/v1/questions/123456789012", headers=headers, timeout=60)
        assert response.status_code == 404, (scheme, response.text)
    wrong = httpx.delete(f"{url}/v1/questions/1", headers={"Authorization": "bearer x"}, timeout=60)
    assert wrong.status_code == 401


def test_a_chunked_body_over_the_limit_gets_413(served):
    url, _, pool_dir = served
    before = (pool_dir / "pool.jsonl").read_bytes()

    def pieces(count: int):  # httpx sends an iterator chunked, without a Content-Length
        yield b'{"question": "'
        yield from (b"a" * 8000 for _ in range(count))
        yield b'"}'

    for path, headers in (("/v1/answer", {}), ("/v1/questions", {"X-API-Key": KEY})):
        response = httpx.post(f"{url}{path}", content=pieces(9), headers=headers, timeout=60)
        assert response.status_code == 413, response.text
        assert "over the limit of 65536 bytes" in response.json()["detail"]
    under = httpx.post(f"{url}/v1/answer", content=pieces(1), timeout=60)  # chunked, under: read whole
    assert under.status_code == 400 and "over the limit of 200" in under.json()["detail"]
    assert (pool_dir / "pool.jsonl").read_bytes() == before


@pytest.mark.parametrize(
    ("path", "framing", "sent"),
    [
        ("/v1/answer", "Content-Length: 100", b'{"question": "How'),
        ("/v1/questions", "Content-Length: 100", b'{"id": 77, "question": "How'),
        ("/v1/answer", "Transfer-Encoding: chunked", b'5\r\n{"que\r\n'),
    ],
)
def test_a_stalled_upload_gets_408_within_the_body_timeout(served, path, framing, sent):
    """Headers and part of the body, then nothing: 408 once ``Limits.body_timeout_s`` (the default, 10 s)
    has passed since the headers, and the connection closed; the server keeps answering."""
    url, _, pool_dir = served
    before = (pool_dir / "pool.jsonl").read_bytes()
    timeout = Limits().body_timeout_s
    port = int(url.rsplit(":", 1)[1])
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: {KEY}\r\n"
    head += f"Content-Type: application/json\r\n{framing}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=timeout + 20) as client:
        start = time.monotonic()
        client.sendall(head.encode() + sent)
        answer = b""
        while chunk := client.recv(65536):  # until the server closes the connection
            answer += chunk
        waited = time.monotonic() - start
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert b"not received within 10 s" in answer
    assert timeout - 1 < waited < timeout + 5, waited
    assert (pool_dir / "pool.jsonl").read_bytes() == before
    assert httpx.get(f"{url}/health", timeout=10).status_code == 200


def sent_as(url: str, kind: str, body: bytes, qid: str, chunked: bool) -> httpx.Response:
    """The request :func:`test_serve_requests.malformed_requests` drew, over HTTP (chunked or not)."""
    method, path = {
        "answer": ("POST", "/v1/answer"),
        "add": ("POST", "/v1/questions"),
        "edit": ("PUT", f"/v1/questions/{quote(qid)}"),
        "delete": ("DELETE", f"/v1/questions/{quote(qid)}"),
    }[kind]
    content = iter([body[: len(body) // 2], body[len(body) // 2 :]]) if chunked else body
    headers = {"X-API-Key": KEY, "Content-Type": "application/json"}
    return httpx.request(method, f"{url}{path}", content=content, headers=headers, timeout=60)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(data=st.data())
def test_fuzzed_malformed_requests_get_a_4xx_and_leave_the_pool(served, data):
    """The readers' fuzz (one defect in a valid request: unencodable text in any field, wrong types, ids
    of other digit systems aimed at pool questions, duplicate keys, deep nesting), sent to the server with
    the write key, chunked or not: each gets a 4xx with one JSON error, and the pool file is unchanged."""
    url, _, pool_dir = served
    kind, body, qid = data.draw(malformed_requests(existing_ids(pool_dir)))
    before = (pool_dir / "pool.jsonl").read_bytes()
    response = sent_as(url, kind, body, qid, data.draw(st.booleans()))
    assert 400 <= response.status_code < 500, response.text
    assert set(response.json()) == {"detail"} and "\n" not in response.json()["detail"]
    assert (pool_dir / "pool.jsonl").read_bytes() == before


def test_every_response_is_hardened_and_the_api_pages_are_off(served):
    """The page: a CSP allowing only its own inline script and style (by hash), no framing, nosniff, no
    referrer; an API response (a refusal too): ``default-src 'none'``; ``/docs`` and ``/openapi.json``
    are off (``--docs`` turns them on)."""
    from graphctx.serve.server import PAGE

    url, _, _ = served
    page = httpx.get(f"{url}/", timeout=10)
    refused = httpx.post(f"{url}/v1/answer", content=b"[]", timeout=10)
    for response in (page, refused):
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["referrer-policy"] == "no-referrer"
    policy = page.headers["content-security-policy"]
    assert policy == page_policy(PAGE.read_text(encoding="utf-8")) and "unsafe" not in policy
    assert "script-src 'sha256-" in policy and "frame-ancestors 'none'" in policy
    assert refused.headers["content-security-policy"] == "default-src 'none'; frame-ancestors 'none'"
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert httpx.get(f"{url}{path}", timeout=10).status_code == 404, path


def test_the_docs_flag_serves_the_api_pages(served, tmp_path):
    """``graphctx serve --docs`` adds FastAPI's ``/docs``, ``/redoc`` and ``/openapi.json`` (the server
    as built, not started: its routes)."""
    from graphctx.cli import subcommand_parser
    from graphctx.command_line import parse
    from graphctx.serve.server import ServeSettings, build_server

    _, config, _ = served
    api_pages = {"/docs", "/redoc", "/openapi.json"}
    for flags, shown in (([], set()), (["--docs"], api_pages)):
        args = parse(subcommand_parser("serve"), ["--config", str(config), *flags])
        server = build_server(ServeSettings(args, str(tmp_path / "pool"), docs=args.docs))
        assert api_pages & {getattr(route, "path", None) for route in server.app.routes} == shown


def test_a_batch_holds_generation_batch_size_requests_unless_told(served, tmp_path):
    """LitServe gathers ``generation.batch_size`` requests into a batch (one decoding batch), or
    ``--max-batch-size`` when given (the server as built, not started)."""
    from graphctx.cli import subcommand_parser
    from graphctx.command_line import parse
    from graphctx.serve.server import ServeSettings, build_server

    _, config, _ = served  # generation.batch_size: 1
    cases = (([], 1), (["--generation.batch_size", "16"], 16), (["--max-batch-size", "3"], 3))
    for flags, size in cases:
        args = parse(subcommand_parser("serve"), ["--config", str(config), *flags])
        settings = ServeSettings(args, str(tmp_path / "pool"), max_batch_size=args.max_batch_size)
        assert build_server(settings).lit_api.max_batch_size == size


def chromium_page(chromium: str, url: str, profile) -> tuple[str, str]:
    """Debian's Chromium, headless, loads ``url`` (the page asks on load) and runs its JS against the server:
    the DOM it dumps and its log (the page's console messages, CSP violations among them)."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=120000"]
    flags += [f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0"]
    done = subprocess.run(
        [chromium, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=300, check=True
    )
    return done.stdout, done.stderr


def find_chromium() -> str:
    import shutil

    chromium = shutil.which("chromium")
    if chromium is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but Debian's chromium is not installed (.ci/run installs it)")
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    return chromium


def test_page_answers_in_headless_chromium_with_graph_and_links(served, tmp_path):
    """The page in headless Chromium: the answer, the citation links to the site, the graph (query node and
    one node per hit, sized by score), the timings, no CSP violation (its script and style run by their
    hashes); and a screenshot of it."""
    import shutil

    chromium = find_chromium()
    url, _, _ = served
    page = f"{url}/?q={quote(QUESTION)}"
    dom, log = chromium_page(chromium, page, tmp_path / "profile")
    assert 'data-answered="yes"' in dom, dom[-2000:]
    assert "Content Security Policy" not in log, log[-3000:]
    expected = httpx.post(f"{url}/v1/answer", json={"question": QUESTION}, timeout=300).json()
    assert 'data-node="query"' in dom
    for hit in expected["hits"]:
        assert f'data-node="{hit["id"]}"' in dom and f'href="{hit["link"]}"' in dom
    assert "generation" in dom and "retrieval_and_kg" in dom
    shot = tmp_path / "page.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=120000"]
    flags += [f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1000,1500"]
    subprocess.run(
        [chromium, *flags, f"--screenshot={shot}", page], capture_output=True, timeout=300, check=True
    )
    assert shot.stat().st_size > 10_000
    if os.environ.get("GRAPHCTX_KEEP_SCREENSHOT"):
        shutil.copy(shot, os.environ["GRAPHCTX_KEEP_SCREENSHOT"])


STORED_ID = 10**9 + 7
STORED = (
    '<script>document.body.dataset.stored = "script"</script>'
    "<img src=x onerror=\"document.body.dataset.stored = 'img'\"> How do I delegate my ADA to a pool?"
)


def test_a_stored_script_shows_as_text_under_the_page_csp(served, tmp_path):
    """A question holding a script and an ``onerror`` handler, stored through the API and retrieved for
    the page: Chromium shows it as text (the neighbour's title and citation), runs none of it, and logs no
    CSP violation (the page's own script ran: it marked the page answered)."""
    url, _, _ = served
    assert write(url, "POST", "/v1/questions", json={"id": STORED_ID, "question": STORED}).status_code == 200
    hits = httpx.post(f"{url}/v1/answer", json={"question": STORED}, timeout=300).json()["hits"]
    assert STORED_ID in [hit["id"] for hit in hits]
    dom, log = chromium_page(find_chromium(), f"{url}/?q={quote(STORED)}", tmp_path / "profile")
    assert 'data-answered="yes"' in dom, dom[-2000:]
    assert "&lt;script&gt;document.body.dataset.stored" in dom and "&lt;img src=x onerror=" in dom
    assert "data-stored" not in dom and "<img src=" not in dom
    assert "Content Security Policy" not in log, log[-3000:]

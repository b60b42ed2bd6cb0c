"""A fake of LanceDB Cloud's REST data plane for the Python tests, on 127.0.0.1.

Lance's own REST server (pylance's ``RestAdapter``, over a directory) stands
behind a front on its own loopback port that, like the fake the Rust tests
use (``tests/common/fake_cloud_dialect.rs``):

* refuses a request without the right ``x-api-key`` (HTTP 401),
* bridges where LanceDB's clients spell a request otherwise than Lance's
  server reads it (an empty POST body, ``describe`` without
  ``load_detailed_metadata``, a query's bare ``vector`` and ``columns``
  lists, an alteration's ``{"type": …}``),
* hides every table's location from ``describe`` answers, so a client can
  only use the API, and
* logs each request's path.

Every wait is bounded (the server behind: 60 s); both servers stop at ``close``.
"""

from __future__ import annotations

import http.client
import http.server
import json
import threading
import urllib.parse

from lance.namespace import RestAdapter

API_KEY = "sk-fake-python-0123456789"
UPSTREAM_TIMEOUT = 60


def _bridge_query(query: dict) -> None:
    vector = query.get("vector")
    if vector is None or vector == []:
        query["vector"] = {}
    elif isinstance(vector, list):
        key = "single_vector" if all(isinstance(v, (int, float)) for v in vector) else "multi_vector"
        query["vector"] = {key: vector}
    columns = query.pop("columns", None)
    if isinstance(columns, list):
        query["columns"] = {"column_names": columns}
    elif isinstance(columns, dict) and "column_names" not in columns:
        query["columns"] = {"column_aliases": columns}
    elif columns is not None:
        query["columns"] = columns


def _bridge_alterations(request: dict) -> None:
    for alteration in request.get("alterations") or []:
        kind = alteration.get("data_type")
        if isinstance(kind, dict) and "type" in kind:
            alteration["data_type"] = kind["type"]


class FakeCloud:
    """The fake service over directory ``root`` (tables are ``root/NAME.lance``)."""

    def __init__(self, root: str):
        self.root = root
        self.requests: list[str] = []
        self._adapter = RestAdapter(
            "dir", {"root": root, "manifest_enabled": "false"}, host="127.0.0.1", port=0
        )
        self._adapter.start()
        upstream_port = self._adapter.port
        fake = self

        class Front(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args):  # noqa: A002 - the base class's name
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0], 16)
                        if size == 0:
                            self.rfile.readline()
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _answer(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _forward(self) -> None:
                body = self._body()
                url = urllib.parse.urlsplit(self.path)
                path = url.path.rstrip("/")
                query = url.query
                fake.requests.append(f"{self.command} {path}")
                if self.headers.get("x-api-key") != API_KEY:
                    # As Lance's REST server answers it (code 16: Unauthenticated).
                    body = b'{"error": "invalid API key", "code": 16}'
                    self._answer(401, body, "application/json")
                    return
                content_type = self.headers.get("Content-Type", "")
                is_json = content_type.startswith("application/json")
                if self.command == "POST" and not body and not path.endswith("/insert"):
                    body, is_json = b"{}", True
                if path.endswith("/describe") and "load_detailed_metadata" not in query:
                    query = "&".join(q for q in (query, "load_detailed_metadata=true") if q)
                if is_json and (path.endswith("/query") or path.endswith("/alter_columns")):
                    value = json.loads(body)
                    if path.endswith("/query"):
                        _bridge_query(value)
                    else:
                        _bridge_alterations(value)
                    body = json.dumps(value).encode()
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower()
                    not in ("host", "content-length", "transfer-encoding", "connection", "content-type")
                }
                if is_json:
                    headers["Content-Type"] = "application/json"
                elif content_type:
                    headers["Content-Type"] = content_type
                conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=UPSTREAM_TIMEOUT)
                try:
                    target = path + (f"?{query}" if query else "")
                    conn.request(self.command, target, body=body, headers=headers)
                    answer = conn.getresponse()
                    data = answer.read()
                    answer_type = answer.getheader("Content-Type") or "text/plain"
                    status = answer.status
                finally:
                    conn.close()
                if path.endswith("/describe") and 200 <= status < 300:
                    value = json.loads(data)
                    # The service never tells where the data is.
                    for key in ("location", "table_uri", "storage_options"):
                        value.pop(key, None)
                    data = json.dumps(value).encode()
                self._answer(status, data, answer_type)

            do_GET = do_POST = do_DELETE = do_PUT = _forward

        self._front = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Front)
        self._front.daemon_threads = True
        self._thread = threading.Thread(target=self._front.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The service's URL (a ``db://`` table's ``host_override``)."""
        return f"http://127.0.0.1:{self._front.server_address[1]}"

    def options(self, **extra: str) -> dict[str, str]:
        """Options of a ``db://`` table or catalog on this fake."""
        return {"api_key": API_KEY, "host_override": self.url, **extra}

    def close(self) -> None:
        self._front.shutdown()
        self._front.server_close()
        self._adapter.stop()

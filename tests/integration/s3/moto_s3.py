"""An S3 server for the tests: moto's, on 127.0.0.1, one bucket `lance`.

Prints the port it listens on, then serves until stdin closes (the test
ended or died) or MAX_SECONDS pass, whichever comes first.

Moto checks `If-None-Match: *` and then writes the object, with no lock
between the two, so two racing conditional PUTs could both succeed. Real S3
makes the check and the write one atomic step, and Lance's commits rely on
that. Requests are therefore served one at a time here: the conditional
write is atomic, as on S3 (connections are still concurrent).
"""

import sys
import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from moto.s3.models import s3_backends
from werkzeug.serving import make_server

MAX_SECONDS = 1800
ACCOUNT = "123456789012"


def main() -> None:
    app = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()

    def serialised(environ, start_response):
        with lock:
            # Moto's responses are materialised: the body is read in here.
            return list(app(environ, start_response))

    server = make_server("127.0.0.1", 0, serialised, threaded=True)
    s3_backends[ACCOUNT]["global"].create_bucket("lance", "us-east-1")
    print(server.server_port, flush=True)

    def stop_on_eof() -> None:
        sys.stdin.read()
        server.shutdown()

    threading.Thread(target=stop_on_eof, daemon=True).start()
    deadline = threading.Timer(MAX_SECONDS, server.shutdown)
    deadline.daemon = True
    deadline.start()
    server.serve_forever()
    sys.exit(0)


if __name__ == "__main__":
    main()

"""`lance-sql serve --tls-cert/--tls-key`: both protocols over TLS, verified
against the server's own certificate; plaintext clients refused."""

from __future__ import annotations

import os
import pathlib
import subprocess

import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import psycopg
import pytest

from conftest import Server

TOKEN = "tls-t0ken-77"


def certificate(directory: pathlib.Path, name: str) -> tuple[pathlib.Path, pathlib.Path]:
    """A self-signed P-256 certificate for 127.0.0.1 and localhost (openssl)."""
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert),
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True, timeout=60,
    )
    return cert, key


@pytest.fixture
def tls_server(serve, data_dir):
    cert, key = certificate(data_dir, "server")
    server = serve("--tls-cert", str(cert), "--tls-key", str(key), "--auth-token", TOKEN)
    server.cert = cert
    return server


def flight_rows(server, uri: str, sql: str) -> list[dict]:
    kwargs = {
        "adbc.flight.sql.authorization_header": f"Bearer {TOKEN}",
        "adbc.flight.sql.client_option.tls_root_certs": server.cert.read_text(),
    }
    with flight_sql.connect(uri, db_kwargs=kwargs) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table().to_pylist()


def pg_connect(server, **kwargs):
    return psycopg.connect(
        host="127.0.0.1", port=server.pg_port, user="me", password=TOKEN, dbname="d",
        autocommit=True, connect_timeout=10, **kwargs,
    )


def test_flight_sql_over_tls(tls_server):
    assert "Flight SQL listening on" in tls_server.log.read_text()
    assert "(TLS)" in tls_server.log.read_text()
    tls_uri = tls_server.uri.replace("grpc://", "grpc+tls://")
    assert flight_rows(tls_server, tls_uri, "SELECT count(*) AS n FROM 'numbers.lance'") == [{"n": 10_000}]
    # A client that does not speak TLS gets no answer (the TLS server
    # resets it), and the server serves on.
    with pytest.raises(adbc_driver_manager.Error, match="server preface"):
        flight_rows(tls_server, tls_server.uri, "SELECT 1")
    assert flight_rows(tls_server, tls_uri, "SELECT 2 AS n") == [{"n": 2}]


def test_flight_sql_client_rejects_a_certificate_it_does_not_trust(tls_server, data_dir):
    other, _ = certificate(data_dir, "other")
    tls_server.cert = other
    with pytest.raises(adbc_driver_manager.Error, match="certificate signed by unknown authority"):
        flight_rows(tls_server, tls_server.uri.replace("grpc://", "grpc+tls://"), "SELECT 1")


def test_postgres_over_tls_and_plaintext_refused(tls_server):
    with pg_connect(tls_server, sslmode="verify-full", sslrootcert=str(tls_server.cert)) as conn:
        assert conn.pgconn.ssl_in_use
        assert conn.execute("SELECT count(*) FROM 'numbers.lance'").fetchall() == [(10_000,)]
    with pytest.raises(psycopg.OperationalError, match="accepts TLS connections only"):
        pg_connect(tls_server, sslmode="disable")
    # psql, as a person types it.
    out = subprocess.run(
        ["psql", "-X", "-At", "-c", "SELECT sum(id) FROM 'numbers.lance'",
         f"host=127.0.0.1 port={tls_server.pg_port} user=me dbname=d sslmode=verify-full "
         f"sslrootcert={tls_server.cert}"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PGPASSWORD": TOKEN, "PGCONNECT_TIMEOUT": "10"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(sum(range(10_000)))
    assert tls_server.alive()


def test_a_key_that_is_not_the_certificates_fails_the_command(lance_sql, data_dir):
    cert, _ = certificate(data_dir, "a")
    _, other_key = certificate(data_dir, "b")
    with pytest.raises(RuntimeError) as failed:
        Server(lance_sql, data_dir, "--tls-cert", str(cert), "--tls-key", str(other_key))
    assert "a.crt" in str(failed.value), failed.value
    assert "BEGIN PRIVATE KEY" not in str(failed.value)
    missing = subprocess.run(
        [lance_sql, "serve", "--flight-sql", "127.0.0.1:0", "--tls-cert", str(cert)],
        capture_output=True, text=True, timeout=60, cwd=data_dir,
    )
    assert missing.returncode != 0
    assert "--tls-key" in missing.stderr

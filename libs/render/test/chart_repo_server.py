#!/usr/bin/env python3
"""A static Helm chart repository for the bundler's tests: serves the files of --dir (what `helm package` and
`helm repo index` wrote) on 127.0.0.1, optionally over TLS (--cert/--key) and behind basic auth (user and password
from the environment, FLOTILLA_CHART_USER / FLOTILLA_CHART_PASSWORD, so they never show in argv). The bound port is
written to --port-file. Every request is logged to stderr (path and status, never credentials).

With --upstream URL it serves no files: GET/HEAD requests are passed to that server instead (read-only), which puts
TLS and basic auth in front of a plain-HTTP OCI registry (`crane registry serve`) for `helm pull oci://`.

On every request it looks for the password in the command line and the environment of every other process it
can read (the client that sent the request, helm, is running then) and logs "PASSWORD VISIBLE in /proc/<pid>/..."
when one shows it: the tests assert that line never appears."""

import argparse
import base64
import hmac
import http.client
import http.server
import urllib.parse
import os
import ssl
import sys


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):  # noqa: N802 (http.server API)
        sys.stderr.write("%s\n" % (fmt % args))
        sys.stderr.flush()

    def check_password_not_visible(self):
        password = os.environ.get("FLOTILLA_CHART_PASSWORD", "").encode()
        if not password:
            return
        for pid in filter(str.isdigit, os.listdir("/proc")):
            if int(pid) == os.getpid():
                continue
            for part in ("cmdline", "environ"):
                try:
                    with open("/proc/%s/%s" % (pid, part), "rb") as f:
                        if password in f.read():
                            sys.stderr.write("PASSWORD VISIBLE in /proc/%s/%s\n" % (pid, part))
                except OSError:
                    pass  # gone, or not ours

    def authorized(self):
        self.check_password_not_visible()
        user = os.environ.get("FLOTILLA_CHART_USER", "")
        if not user:
            return True
        scheme, _, value = self.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            given_user, _, given_password = base64.b64decode(value.strip()).decode("utf-8").partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        return hmac.compare_digest(given_user, user) and \
            hmac.compare_digest(given_password, os.environ.get("FLOTILLA_CHART_PASSWORD", ""))

    def do_GET(self):  # noqa: N802
        self.serve()

    def do_HEAD(self):  # noqa: N802
        self.serve()

    def serve(self):
        if not self.authorized():
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="charts"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.server.upstream:
            self.forward()
        elif self.command == "HEAD":
            super().do_HEAD()
        else:
            super().do_GET()

    def forward(self):
        upstream = self.server.upstream
        connection = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() in ("accept", "range")}
        connection.request(self.command, self.path, headers=headers)
        response = connection.getresponse()
        body = response.read()
        self.send_response(response.status)
        length = response.getheader("Content-Length") if self.command == "HEAD" else None
        for key, value in response.getheaders():
            if key.lower() not in ("content-length", "connection", "transfer-encoding", "date", "server"):
                self.send_header(key, value)
        self.send_header("Content-Length", length if length is not None else str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        connection.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--upstream")
    args = parser.parse_args()
    handler = lambda *a, **kw: Handler(*a, directory=args.dir, **kw)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.upstream = urllib.parse.urlparse(args.upstream) if args.upstream else None
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    with open(args.port_file + ".tmp", "w") as out:
        out.write(str(server.server_address[1]))
    os.rename(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Smart-HTTP git server for Flotilla tests.

Runs the real `git http-backend` as a CGI program for each request, behind a small threaded HTTP server,
optionally over TLS and optionally behind basic/bearer authentication. Started and stopped by
flotilla::harness::GitServer (tests/harness/git); not meant for anything but tests on 127.0.0.1.

Why not `python3 -m http.server --cgi`: as root it drops to `nobody` (git then refuses the repos as
"dubious ownership"), and its fork path writes to the raw socket, which breaks TLS. Here the backend is a
plain subprocess with pipes, the whole response is buffered and sent with a Content-Length.

A request under /redirect/<path> is answered with a 302 to the same server as http(s)://localhost:<port>/<path>.

Secrets come from the environment (FLOTILLA_GIT_HTTP_USER / _PASSWORD / _TOKEN), never from argv, so
they do not show in process listings; they are never logged.
"""

import argparse
import base64
import hmac
import http.server
import os
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse

MAX_BODY = 256 << 20


def log(message):
    sys.stderr.write("%s %s\n" % (time.strftime("%H:%M:%S"), message))
    sys.stderr.flush()


class GitHandler(http.server.BaseHTTPRequestHandler):
    server_version = "flotilla-test-git/1"
    # HTTP/1.0 semantics: one request per connection, which keeps the server trivial.
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):  # noqa: N802 (http.server API)
        log("%s %s" % (self.client_address[0], fmt % args))

    def do_GET(self):  # noqa: N802
        self.serve()

    def do_POST(self):  # noqa: N802
        self.serve()

    def authorized(self):
        cfg = self.server.cfg
        if not cfg["user"] and not cfg["token"]:
            return True, ""
        header = self.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        scheme = scheme.lower()
        if scheme == "basic":
            try:
                user, _, password = base64.b64decode(value.strip()).decode("utf-8").partition(":")
            except (ValueError, UnicodeDecodeError):
                return False, ""
            if cfg["user"] and hmac.compare_digest(user, cfg["user"]) and \
                    hmac.compare_digest(password, cfg["password"]):
                return True, user
            # Token style (GitHub/GitLab): any user name, the token as password.
            if cfg["token"] and hmac.compare_digest(password, cfg["token"]):
                return True, user or "token"
        elif scheme == "bearer" and cfg["token"]:
            if hmac.compare_digest(value.strip(), cfg["token"]):
                return True, "token"
        return False, ""

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            total = 0
            while True:
                size_line = self.rfile.readline()
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                total += size
                if total > MAX_BODY:
                    raise ValueError("request body too large")
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length", "0") or "0")
        if length > MAX_BODY:
            raise ValueError("request body too large")
        return self.rfile.read(length) if length > 0 else b""

    def serve(self):
        if self.path.startswith("/redirect/"):
            # Sends the client to the same server under the name "localhost": lets tests check what a client
            # does when a redirect changes the host (it must not send credentials meant for 127.0.0.1).
            scheme = "https" if self.server.tls_context is not None else "http"
            location = "%s://localhost:%d/%s" % (scheme, self.server.server_address[1], self.path[len("/redirect/"):])
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        ok, user = self.authorized()
        if user:
            log("%s authenticated as %s" % (self.client_address[0], user))
        if not ok:
            log("%s unauthorized (credentials offered: %s)" % (
                self.client_address[0], "yes" if self.headers.get("Authorization") else "no"))
            body = b"authentication required\n"
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="flotilla-test-git"')
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        try:
            body = self.read_body()
        except ValueError as err:
            self.send_error(400, str(err))
            return
        path, _, query = self.path.partition("?")
        env = dict(self.server.cfg["env"])
        env.update({
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "SERVER_SOFTWARE": self.server_version,
            "REQUEST_METHOD": self.command,
            "PATH_INFO": urllib.parse.unquote(path),
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": self.client_address[0],
            "REMOTE_USER": user,
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
        })
        try:
            result = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True,
                                    timeout=120, check=False)
        except subprocess.TimeoutExpired:
            self.send_error(504, "git http-backend timed out")
            return
        if result.stderr:
            log("http-backend: " + result.stderr.decode("utf-8", "replace").strip())
        out = result.stdout
        sep = out.find(b"\r\n\r\n")
        skip = 4
        if sep < 0:
            sep, skip = out.find(b"\n\n"), 2
        if sep < 0:
            self.send_error(502, "git http-backend gave no CGI headers")
            return
        status = 200
        headers = []
        for line in out[:sep].decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split(" ")[0])
            elif name:
                headers.append((name.strip(), value.strip()))
        payload = out[sep + skip:]
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class GitHttpServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, cfg, tls_context):
        self.cfg = cfg
        self.tls_context = tls_context
        super().__init__(address, GitHandler)

    def finish_request(self, request, client_address):
        # The TLS handshake runs here, in the per-connection thread, so a stuck client cannot block accept().
        if self.tls_context is not None:
            request.settimeout(30)
            try:
                request = self.tls_context.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError) as err:
                log("%s TLS handshake failed: %s" % (client_address[0], err))
                return
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address):
        log("%s request failed: %s" % (client_address[0], sys.exc_info()[1]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="directory holding the bare repositories")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every address)")
    parser.add_argument("--port-file", required=True, help="the bound port is written here once listening")
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--parent-pid", type=int, default=0, help="exit when this process is gone")
    args = parser.parse_args()

    env = {key: value for key, value in os.environ.items() if not key.startswith("FLOTILLA_GIT_HTTP_")}
    env.update({
        "GIT_PROJECT_ROOT": os.path.abspath(args.root),
        "GIT_HTTP_EXPORT_ALL": "1",
        # Repos may be owned by another user than the one running this server.
        "GIT_CONFIG_COUNT": "2",
        "GIT_CONFIG_KEY_0": "safe.directory",
        "GIT_CONFIG_VALUE_0": "*",
        "GIT_CONFIG_KEY_1": "http.receivepack",
        "GIT_CONFIG_VALUE_1": "true",
    })
    cfg = {
        "env": env,
        "user": os.environ.get("FLOTILLA_GIT_HTTP_USER", ""),
        "password": os.environ.get("FLOTILLA_GIT_HTTP_PASSWORD", ""),
        "token": os.environ.get("FLOTILLA_GIT_HTTP_TOKEN", ""),
    }
    tls_context = None
    if args.tls_cert:
        tls_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls_context.load_cert_chain(args.tls_cert, args.tls_key)

    # Restarting on the same port can briefly race the old socket; retry for a few seconds.
    deadline = time.time() + 10
    while True:
        try:
            server = GitHttpServer((args.host, args.port), cfg, tls_context)
            break
        except OSError as err:
            if time.time() > deadline:
                log("cannot bind %s:%d: %s" % (args.host, args.port, err))
                return 1
            time.sleep(0.1)
    port = server.server_address[1]
    tmp = args.port_file + ".tmp"
    with open(tmp, "w", encoding="ascii") as handle:
        handle.write("%d\n" % port)
    os.replace(tmp, args.port_file)
    log("listening on %s:%d (%s)" % (args.host, port, "https" if tls_context else "http"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    # Exit when the test that started us dies without stopping us (a crash or a ctest timeout kill).
    parent = args.parent_pid or os.getppid()
    try:
        while thread.is_alive() and os.getppid() == parent:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

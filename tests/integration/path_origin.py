#!/usr/bin/env python3
"""A second origin for the path corpus test (wire-path-corpus): Python's own
http.server, reading each request path with the standard library's
SimpleHTTPRequestHandler.translate_path, unchanged, and answering which
location of its document root that reading lands in (X-Loc: healthz, v1 or
root) instead of serving a file. nginx is the other origin; the test checks
that what the appliance judged is what each of them executed.

  path_origin.py --bind ADDR --port N --root DIR
"""
import argparse
import http.server
import os
import socketserver


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def location(self):
        # The stdlib's reading: query cut, percent-decoded, normpath'd, '.'/'..'
        # and separators inside words dropped, a trailing '/' kept.
        path = self.translate_path(self.path)
        root = os.path.abspath(self.directory)
        if path == os.path.join(root, "healthz"):
            return "healthz"
        if path.startswith(os.path.join(root, "v1") + "/"):
            return "v1"
        return "root"

    def do_GET(self):
        body = (self.location() + "\n").encode()
        self.send_response(200)
        self.send_header("X-Loc", self.location())
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def log_message(self, fmt, *args):
        # One line per request, to the test's output (stderr).
        super().log_message(fmt, *args)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bind", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--root", required=True)
    a = ap.parse_args()
    os.makedirs(os.path.join(a.root, "v1"), exist_ok=True)

    def handler(*args, **kwargs):
        return Handler(*args, directory=a.root, **kwargs)

    with Server((a.bind, a.port), handler) as s:
        s.serve_forever()


if __name__ == "__main__":
    main()

"""No command reaches the network: ``demo`` and ``report`` (which runs the analysis and the replay) run under an
audit hook that fails on any connection (or name lookup) that is not loopback."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KV = ROOT / "traces" / "samples" / "kv-cache-tester"

DRIVER = textwrap.dedent("""
    import ipaddress, socket, sys

    LOOPBACK = {"localhost", "localhost.localdomain", "ip6-localhost"}
    seen, refused = [], []

    def loopback(host):
        if isinstance(host, bytes):
            host = host.decode()
        if host is None or host in LOOPBACK:
            return True
        try:
            return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
        except ValueError:
            return False

    def hook(event, args):
        if event == "socket.connect":
            sock, address = args
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                seen.append(address[0])
                if not loopback(address[0]):
                    refused.append(address)
                    raise OSError(f"audit: connection to {address} refused")
        elif event == "socket.getaddrinfo":
            if not loopback(args[0]):
                refused.append(args[0])
                raise OSError(f"audit: name lookup of {args[0]!r} refused")

    sys.addaudithook(hook)
    from agentprof.cli import main

    code = 0
    try:
        if sys.argv[1:] == ["selfcheck"]:  # the hook itself: a non-loopback connect must be refused
            for attempt in (lambda: socket.create_connection(("example.com", 80), timeout=0.1),
                            lambda: socket.socket().connect(("192.0.2.1", 9))):
                try:
                    attempt()
                except OSError:
                    pass
        else:
            main(sys.argv[1:])
    except SystemExit as e:
        code = e.code or 0
    print("AUDIT", code, len(seen), len(refused), refused[:3], file=sys.stderr)
""")


def _audited(*args: str) -> tuple[int, int, int, str]:
    done = subprocess.run([sys.executable, "-c", DRIVER, *args], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    line = [ln for ln in done.stderr.splitlines() if ln.startswith("AUDIT ")][-1]
    _, code, seen, refused, _rest = line.split(" ", 4)
    return int(code), int(seen), int(refused), done.stderr


def test_commands_make_no_non_loopback_connection(tmp_path):
    code, seen, refused, err = _audited("demo", "--out", str(tmp_path / "reports"), "--traces",
                                        str(tmp_path / "traces"))
    assert (code, refused) == (0, 0), err
    assert seen > 0  # the demo's model calls did go over sockets (to 127.0.0.1), so the hook was watching
    # the report runs the analysis and the replay (catalog, fitted terms, tokenizer) and renders the page: every
    # path of `analyze` and `replay` that could reach for the network, in one process
    code, _, refused, err = _audited("report", str(KV), "-o", str(tmp_path / "r.html"), "-s", "jalapeno",
                                     "-s", "h200+x86")
    assert (code, refused) == (0, 0), err


def test_the_audit_hook_refuses_a_non_loopback_connection():
    code, seen, refused, err = _audited("selfcheck")
    assert (seen, refused) == (1, 2), err  # the lookup and the connect

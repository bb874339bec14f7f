"""Small real-traffic probes run inside the test bed's namespaces."""

import subprocess
import sys
import textwrap

UDP_SINK = textwrap.dedent("""
    import select, socket, sys, time
    fam = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((sys.argv[1], int(sys.argv[2])))
    s.setblocking(False)
    count, grace, end = int(sys.argv[3]), float(sys.argv[4]), time.monotonic() + float(sys.argv[5])
    print('READY', flush=True)
    n, full = 0, None
    def drain():
        global n
        while True:
            try:
                s.recv(2048); n += 1
            except BlockingIOError:
                return
    # until stdin closes (the sender is done and the settle time passed), or `grace` after `count`
    # arrived (more would be duplicates: still counted), or the time limit
    while time.monotonic() < end and (full is None or time.monotonic() < full + grace):
        ready, _, _ = select.select([s, sys.stdin], [], [], 0.05)
        if s in ready:
            drain()
        if n >= count and full is None:
            full = time.monotonic()
        if sys.stdin in ready:
            break
    drain()
    print(n, flush=True)
""")

UDP_SEND = textwrap.dedent("""
    import socket, sys
    fam = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((sys.argv[1], 0))
    for _ in range(int(sys.argv[4])):
        s.sendto(b'fwlab-probe', (sys.argv[2], int(sys.argv[3])))
""")

TCP_CONNECT = textwrap.dedent("""
    import socket, sys
    fam = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
    c = socket.socket(fam, socket.SOCK_STREAM); c.settimeout(2)
    c.bind((sys.argv[1], 0))
    try:
        c.connect((sys.argv[2], int(sys.argv[3]))); c.sendall(b'x'); print('OK')
    except OSError as e:
        print('FAIL', e)
""")

TCP_LISTEN = textwrap.dedent("""
    import socket, sys
    fam = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(8); s.settimeout(float(sys.argv[3]))
    print('READY', flush=True)
    try:
        c, _ = s.accept(); print('ACCEPTED', c.recv(1), flush=True)
    except OSError:
        print('NONE', flush=True)
""")


def udp_probe(bed, src: str, dst: str, port: int, count: int = 20, *, listen_addr: str | None = None,
              listen_port: int | None = None, settle_s: float = 0.5, grace_s: float = 0.2) -> int:
    """Send ``count`` datagrams from ``src`` (client ns) to ``dst``:``port``; return how many the
    server ns received at ``listen_addr``:``listen_port`` (default ``dst``:``port``; another when the
    DUT translates), counted until ``settle_s`` after the sender finished, or ``grace_s`` after all
    ``count`` arrived (so a duplicate still shows as more than ``count``)."""
    sink = subprocess.Popen(["ip", "netns", "exec", bed.ns("server"), sys.executable, "-c", UDP_SINK,
                             listen_addr or dst, str(port if listen_port is None else listen_port), str(count),
                             str(grace_s), "30"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout.readline().strip() == "READY"
        bed.host.run([sys.executable, "-c", UDP_SEND, src, dst, str(port), str(count)], ns=bed.ns("client"))
        try:
            sink.wait(timeout=settle_s)
        except subprocess.TimeoutExpired:
            pass
        sink.stdin.close()  # stop counting (a sink that ended by itself has nothing more to read)
        out = sink.stdout.read()
        sink.wait(timeout=5)
    finally:
        if sink.poll() is None:
            sink.kill()
            sink.wait()
    return int(out.strip().splitlines()[-1])


def tcp_probe(bed, src: str, dst: str, port: int) -> bool:
    lst = subprocess.Popen(["ip", "netns", "exec", bed.ns("server"), sys.executable, "-c", TCP_LISTEN, dst,
                            str(port), "3"], stdout=subprocess.PIPE, text=True)
    assert lst.stdout.readline().strip() == "READY"
    cp = bed.host.run([sys.executable, "-c", TCP_CONNECT, src, dst, str(port)], ns=bed.ns("client"))
    out, _ = lst.communicate(timeout=10)
    return cp.stdout.startswith("OK") and "ACCEPTED" in out

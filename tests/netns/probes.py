"""Small real-traffic probes run inside the test bed's namespaces."""

import subprocess
import sys
import textwrap

UDP_SINK = textwrap.dedent("""
    import socket, sys, time
    fam = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((sys.argv[1], int(sys.argv[2])))
    s.settimeout(0.2)
    print('READY', flush=True)
    end = time.monotonic() + float(sys.argv[3]); n = 0
    while time.monotonic() < end:
        try:
            s.recv(2048); n += 1
        except socket.timeout:
            pass
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


def udp_probe(bed, src: str, dst: str, port: int, count: int = 20, listen_s: float = 1.5) -> int:
    """Send ``count`` datagrams from ``src`` (client ns) to ``dst``:``port`` (server ns); return how many arrived."""
    sink = subprocess.Popen(["ip", "netns", "exec", bed.ns("server"), sys.executable, "-c", UDP_SINK, dst,
                             str(port), str(listen_s)], stdout=subprocess.PIPE, text=True)
    assert sink.stdout.readline().strip() == "READY"
    bed.host.run([sys.executable, "-c", UDP_SEND, src, dst, str(port), str(count)], ns=bed.ns("client"))
    out, _ = sink.communicate(timeout=listen_s + 5)
    return int(out.strip().splitlines()[-1])


def tcp_probe(bed, src: str, dst: str, port: int) -> bool:
    lst = subprocess.Popen(["ip", "netns", "exec", bed.ns("server"), sys.executable, "-c", TCP_LISTEN, dst,
                            str(port), "3"], stdout=subprocess.PIPE, text=True)
    assert lst.stdout.readline().strip() == "READY"
    cp = bed.host.run([sys.executable, "-c", TCP_CONNECT, src, dst, str(port)], ns=bed.ns("client"))
    out, _ = lst.communicate(timeout=10)
    return cp.stdout.startswith("OK") and "ACCEPTED" in out

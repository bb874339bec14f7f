"""Hand experiments on why nft's rule walk runs at two speeds on a shared host (issue 30; the
findings and figures: docs/measurements.md, "Why the raw in-kernel slope moves between runs").

Builds one routed test bed, loads fwlab's linear rule set of 1,000 rules and the 1,000-rule nft
reference chain once, and runs steps of 1 s cost probes at 20 kpps (each probe: the firewall's
bracket, the reference's and the floor, their p10 / p50 / p90, the per-packet ratio, the CPU the
packets were timed on, each CPU's busy share and steal from /proc/stat over the probe). Steps:

    same:K[:CPU[:RATE[:BURST[:RT]]]]  K probes with nothing reloaded (sender on CPU, RT: SCHED_FIFO prio)
    reload:K                          K reloads of the same rules and reference, 2 probes each
    bg:spin|pollute:CPU:K             K probes with a busy loop (spin) or a 16 MB memory walk on CPU
    load:N                            load N linear rules instead

METER=1 (METER_CPU=C) runs an ALU-speed meter (meter.c, a dependent multiply-add chain timed in
0.13 ms windows) beside each probe, on the other CPU (or C), and prints its GHz (4 cycles / step).
Prints one JSON line per probe; asserts nothing. As root, under the shared lock:

    flock /tmp/fwlab-live.lock env PYTHONPATH=src FWLAB_ENGINE=... python tools/kclock_speed/probe_speed.py same:12 reload:5
"""
import json, os, subprocess, sys, time
from pathlib import Path
from fwlab.probes.brackets import plan, nft_base_chains
from fwlab.probes.kclock import CostProbe
from fwlab.probes.reference import ReferenceChain
from fwlab.probes import histogram as H
from fwlab.runners import engine as eng, engine_args as ea
from fwlab.testbed import Testbed, Topology, new_run_id
from fwlab.methods.kernel_cost import ruleset_for
from fwlab.dut.nftables import Nftables

def stat():
    out = {}
    for ln in open("/proc/stat"):
        if ln.startswith("cpu") and ln[3].isdigit():
            f = ln.split(); v = list(map(int, f[1:]))
            out[f[0]] = (sum(v[:3]) + sum(v[4:7]), v[3], v[7])  # busy(user,nice,sys,iowait..softirq), idle, steal
    return out

def pct(b, q):
    return H.percentile(b.counts, q)

HERE = Path(__file__).resolve().parent


def tool(name: str) -> str:
    """The helper program ``name`` (built from HERE/name.c with gcc on first use)."""
    exe = Path("/tmp") / f"fwlab-kclock-speed-{name}"
    if not exe.exists():
        subprocess.run(["gcc", "-O2", "-o", str(exe), str(HERE / f"{name}.c")], check=True)
    return str(exe)


METER = os.environ.get('METER') == '1'
METER_CPU = int(os.environ['METER_CPU']) if os.environ.get('METER_CPU') else None

def probe(bed, ref, rate=20000, secs=1.0, cpu=0, burst=1, tag="", rt=None):
    host, ns = bed.host, bed.ns("dut")
    cp = host.run(["nft", "-j", "list", "chains"], ns=ns, check=False, timeout_s=60)
    chains = [c for c in nft_base_chains(cp.stdout) if "fwlab_kclock_ref" not in c.name]
    p = plan(chains, families=("ipv4",), reference=(ref.base_chain(),))
    t = ea.EngineTrial(duration_s=secs, rate_pps=rate, frame_size=64, ip_version=4,
                       send_cpus=(cpu,), recv_cpus=(1 - cpu,), burst=burst, rt_priority=rt)
    s0 = stat(); t0 = time.time()
    with CostProbe(host, ns, p, max_s=secs + 20) as pr:
        met = subprocess.Popen([tool("meter"), str(METER_CPU if METER_CPU is not None else 1 - cpu), str(secs)], stdout=subprocess.PIPE, text=True) if METER else None
        m = eng.run_trial(bed, t, int(rate * secs)).metrics
        mo = met.communicate()[0].split() if met else None
    s1 = stat()
    r = pr.result()
    ch, rf, fl = r.of_role("chains")[0], r.of_role("reference")[0], r.of_role("floor")[0]
    d = {c: tuple(b - a for a, b in zip(s0[c], s1[c])) for c in s0}
    row = dict(rt=rt, tag=tag, t=round(t0, 1), cpu=cpu, rate=rate, burst=burst, sent=m.get("offered_count"),
               ch_p10=pct(ch, 10), ch_p50=ch.p50_ns, ch_p90=pct(ch, 90), ref_p10=pct(rf, 10), ref_p50=rf.p50_ns,
               ref_p90=pct(rf, 90), floor=fl.p50_ns, ratio=rf.packet_ratio(50),
               percpu=[n for n, _ in ch.per_cpu],
               busy0=round(100 * d["cpu0"][0] / max(1, d["cpu0"][0] + d["cpu0"][1])),
               busy1=round(100 * d["cpu1"][0] / max(1, d["cpu1"][0] + d["cpu1"][1])),
               steal=(d["cpu0"][2], d["cpu1"][2]), ghz=round(4 / float(mo[0]), 3) if mo else None)
    print(json.dumps(row), flush=True)
    return row

def load(bed, n, ref):
    rs = ruleset_for(bed, n, "linear")
    text = Nftables().render(rs, "routed")
    bed.host.run(["nft", "-f", "-"], ns=bed.ns("dut"), input=text, timeout_s=120)
    ref.install(bed.host, bed.ns("dut"))

if __name__ == "__main__":
    steps = sys.argv[1:]
    ref = ReferenceChain(rules=1000)
    with Testbed(Topology(run_id=new_run_id(), mode="routed")) as bed:
        load(bed, 1000, ref)
        for st in steps:
            kind, *a = st.split(":")
            if kind == "same":      # same:K[:cpu[:rate[:burst]]]  K probes, no reload
                k = int(a[0]); cpu = int(a[1]) if len(a) > 1 else 0
                rate = float(a[2]) if len(a) > 2 else 20000; burst = int(a[3]) if len(a) > 3 else 1
                rt = int(a[4]) if len(a) > 4 else None
                for _ in range(k):
                    probe(bed, ref, rate=rate, cpu=cpu, burst=burst, tag=st, rt=rt)
            elif kind == "reload":  # reload:K  K reloads of the same rules, 2 probes each
                for i in range(int(a[0])):
                    load(bed, 1000, ref)
                    probe(bed, ref, tag=f"reload{i}a"); probe(bed, ref, tag=f"reload{i}b")
            elif kind == "bg":      # bg:prog:cpu:K  a background program on cpu during K probes
                prog, cpu, k = a[0], a[1], int(a[2])
                args = {"spin": [tool("spin"), cpu, "60"], "pollute": [tool("pollute"), cpu, "60", "16"]}[prog]
                bgp = subprocess.Popen(args)
                try:
                    for _ in range(k):
                        probe(bed, ref, tag=st)
                finally:
                    bgp.kill(); bgp.wait()
            elif kind == "load":    # load:N
                load(bed, int(a[0]), ref)

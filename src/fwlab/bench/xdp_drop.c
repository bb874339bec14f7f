// XDP program for `fwlab bench engine`: drop every frame at the DUT's ingress, so the rate that
// arrives there is the generator's own limit (no forwarding path behind it).
// Build: clang -O2 -g -target bpf -I/usr/include/x86_64-linux-gnu -c xdp_drop.c -o xdp_drop.o
// (copied from engine/scripts/xdp_drop.c)
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_drop_all(struct xdp_md *ctx)
{
	return XDP_DROP;
}

char _license[] SEC("license") = "GPL";

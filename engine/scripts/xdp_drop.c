// Minimal XDP program for the dev bed: drop every frame at the DUT ingress.
// Build: clang -O2 -g -target bpf -I/usr/include/x86_64-linux-gnu -c xdp_drop.c -o xdp_drop.o
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_drop_all(struct xdp_md *ctx)
{
	return XDP_DROP;
}

char _license[] SEC("license") = "GPL";

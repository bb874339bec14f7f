// fwlab's XDP firewall: the generator's rule set at the DUT's ingress veths, before the stack.
//
// Three programs share one set of maps (the loader, xdp_loader.c, loads only the one it needs):
//   xdp_linear  every rule in the `rules` array, walked in order with bpf_loop (first match wins):
//               costs per rule, like a linear netfilter chain;
//   xdp_map     the deny entries in the `deny` hash (src, protocol, dst port: one lookup whatever
//               their number), then the few remaining rules (the permits) in `rules`;
//   xdp_pass    passes every frame: the reference that measures what attaching XDP costs.
// Not filtered (passed and counted in slot 0, "infra"): non-IP frames (ARP), IPv6 neighbour
// discovery, and IP packets of the other family than the rule set's (an nftables ip/ip6 table does
// not see them either). No match -> dropped, counted in slot 1 ("default").
// Counters: one per-CPU packet counter per slot; the loader gives each rule its slot.
// IPv6 extension headers are not walked: the next header must be TCP, UDP or ICMPv6 for ports/ND.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define ACT_PASS 1
#define ACT_DROP 2
#define SLOT_INFRA 0
#define SLOT_DEFAULT 1

struct rule {
	__u32 src[4], smask[4], dst[4], dmask[4]; /* network byte order, as in the packet */
	__u16 dport_lo, dport_hi;                 /* host byte order */
	__u8 proto;                               /* 0 = any */
	__u8 action;                              /* ACT_PASS or ACT_DROP */
	__u16 pad;
	__u32 slot;                               /* counter slot */
};

struct deny_key {
	__u32 src[4];
	__u16 dport; /* host byte order */
	__u8 proto;
	__u8 pad;
};

struct config {
	__u32 nrules; /* entries used in `rules` */
	__u32 family; /* 4 or 6 */
};

/* max_entries are set by the loader before loading, to the rule set's size */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rule);
} rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct deny_key);
	__type(value, __u32);
} deny SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config SEC(".maps");

struct pkt {
	__u32 src[4], dst[4];
	__u16 dport;
	__u8 proto;
	__u8 v6;
};

struct walk {
	struct pkt p;
	__u32 slot;
	__u32 action;
};

static __always_inline void count(__u32 slot)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &slot);
	if (c)
		*c += 1;
}

/* 0: an IP packet of the rule set's family, parsed into *p; 1: infra (pass unfiltered) */
static __always_inline int parse(struct xdp_md *ctx, struct pkt *p, __u32 family)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	void *l4;

	if ((void *)(eth + 1) > end)
		return 1;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if (family != 4 || (void *)(ip + 1) > end)
			return 1;
		p->src[0] = ip->saddr;
		p->dst[0] = ip->daddr;
		p->proto = ip->protocol;
		if (ip->frag_off & bpf_htons(0x1fff)) /* a later fragment: no ports */
			return 0;
		l4 = (void *)ip + ip->ihl * 4;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if (family != 6 || (void *)(ip6 + 1) > end)
			return 1;
		__builtin_memcpy(p->src, &ip6->saddr, 16);
		__builtin_memcpy(p->dst, &ip6->daddr, 16);
		p->proto = ip6->nexthdr;
		p->v6 = 1;
		l4 = ip6 + 1;
		if (p->proto == IPPROTO_ICMPV6) {
			__u8 *type = l4;
			if ((void *)(type + 1) > end)
				return 0;
			if (*type >= 133 && *type <= 136) /* router/neighbour solicitation/advertisement */
				return 1;
			return 0;
		}
	} else {
		return 1;
	}
	if (p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP) {
		__u16 *ports = l4; /* source port, destination port: same place in TCP and UDP */
		if ((void *)(ports + 2) > end)
			return 0;
		p->dport = bpf_ntohs(ports[1]);
	}
	return 0;
}

static long match_rule(__u32 i, void *data)
{
	struct walk *w = data;
	struct rule *r = bpf_map_lookup_elem(&rules, &i);

	if (!r)
		return 1;
	if ((w->p.src[0] & r->smask[0]) != r->src[0] || (w->p.dst[0] & r->dmask[0]) != r->dst[0])
		return 0;
	if (w->p.v6) {
		if ((w->p.src[1] & r->smask[1]) != r->src[1] || (w->p.src[2] & r->smask[2]) != r->src[2] ||
		    (w->p.src[3] & r->smask[3]) != r->src[3] || (w->p.dst[1] & r->dmask[1]) != r->dst[1] ||
		    (w->p.dst[2] & r->dmask[2]) != r->dst[2] || (w->p.dst[3] & r->dmask[3]) != r->dst[3])
			return 0;
	}
	if (r->proto) {
		if (r->proto != w->p.proto || w->p.dport < r->dport_lo || w->p.dport > r->dport_hi)
			return 0;
	}
	w->slot = r->slot;
	w->action = r->action;
	return 1;
}

static __always_inline int verdict(struct walk *w, __u32 nrules)
{
	w->slot = SLOT_DEFAULT;
	w->action = ACT_DROP;
	bpf_loop(nrules, match_rule, w, 0);
	count(w->slot);
	return w->action == ACT_PASS ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int xdp_linear(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	struct walk w = {};

	if (!cfg)
		return XDP_PASS;
	if (parse(ctx, &w.p, cfg->family)) {
		count(SLOT_INFRA);
		return XDP_PASS;
	}
	return verdict(&w, cfg->nrules);
}

SEC("xdp")
int xdp_map(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	struct walk w = {};

	if (!cfg)
		return XDP_PASS;
	if (parse(ctx, &w.p, cfg->family)) {
		count(SLOT_INFRA);
		return XDP_PASS;
	}
	if (w.p.proto == IPPROTO_TCP || w.p.proto == IPPROTO_UDP) {
		struct deny_key k = {};
		__u32 *slot;

		__builtin_memcpy(k.src, w.p.src, 16);
		k.dport = w.p.dport;
		k.proto = w.p.proto;
		slot = bpf_map_lookup_elem(&deny, &k);
		if (slot) {
			count(*slot);
			return XDP_DROP;
		}
	}
	return verdict(&w, cfg->nrules);
}

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";

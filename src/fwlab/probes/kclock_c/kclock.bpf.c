// fwlab's in-kernel clock: netfilter programs that time the firewall per packet.
//
// A *bracket* is two programs on one netfilter hook (family, hook number) of the DUT's network
// namespace: enter_K at a priority just before the firewall's base chain, leave_K just after it.
// enter_K stamps bpf_ktime_get_ns() and the packet's sk_buff address into bracket K's per-CPU
// slot; leave_K, on the same packet (same sk_buff, same CPU: a netfilter hook runs to its end
// without migrating), adds the gap to bracket K's per-CPU log-linear histogram, count and sum.
// A packet the chain drops (or steals) never reaches leave_K: its slot is still full when the next
// packet enters, which counts it as "unfinished" and times nothing. Every program returns
// NF_ACCEPT: the probe never changes a verdict, with one exception asked for by the loader: a
// bracket given a *drop mark* M (drop_mark[K] = M) returns NF_DROP from leave_K for a packet whose
// skb->mark is M, after taking its stamp. That times a dropped class on a marked copy of the rule
// set (each drop verdict replaced by "meta mark set M accept"): the packet is still dropped on the
// same hook right after the chain that decided it, and nothing after that chain runs on it.
//
// Histogram bucket of a gap v [ns]: v itself below 128; above, 64 sub-buckets per power of two
// (bucket width 1/64..1/128 of the value, so 0.8-1.6 %), up to 2^(7+OCTAVES) ns (4.3 s); larger
// gaps go to the last bucket: bucket i >= 128 holds [(64 + i % 64) << (i / 64 - 1), + 1 << (i / 64 - 1)). The loader (kclock_loader.c) decodes it the same way.
//
// Built with clang -target bpf. Debian 12's libbpf 1.1 predates SEC("netfilter"): the loader sets
// the program type (BPF_PROG_TYPE_NETFILTER) itself and links with a raw BPF_LINK_CREATE.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define NF_DROP 0
#define NF_ACCEPT 1
#define MAX_BRACKETS 32
#define SUB_BITS 6
#define SUB (1 << SUB_BITS)
#define OCTAVES 25
#define NBUCKETS (2 * SUB + OCTAVES * SUB)
#define RATIO_SHIFT 16

// the program context of BPF_PROG_TYPE_NETFILTER (include/linux/filter.h, struct bpf_nf_ctx)
// the packet's mark, located by CO-RE against the running kernel's BTF (libbpf relocates it)
struct sk_buff {
	__u32 mark;
} __attribute__((preserve_access_index));

struct bpf_nf_ctx {
	const void *state;
	struct sk_buff *skb;
};

struct slot {
	__u64 skb;  // address of the packet that entered (0: empty)
	__u64 t_ns; // its enter stamp
};

struct stats {
	__u64 entered;    // enter_K runs
	__u64 left;       // leave_K runs that matched the slot: the timed packets
	__u64 sum_ns;     // sum of their gaps
	__u64 unfinished; // packets that entered and never left (dropped or stolen in between)
	__u64 unmatched;  // leave_K runs with no matching enter (a packet that skipped enter_K)
	__u64 max_ns;     // largest gap
	__u64 paired;     // timed packets also timed by the partner bracket (same packet, just before)
	__u64 ratio_sum;  // sum over them of partner gap / this gap, x 2^RATIO_SHIFT
	__u64 dropped;    // packets leave_K dropped because they carried the bracket's drop mark
};

// the gap of the packet that last left each bracket, for a partner bracket later on the same hook
struct last {
	__u64 skb;
	__u64 gap_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_BRACKETS);
	__type(key, __u32);
	__type(value, struct slot);
} slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_BRACKETS);
	__type(key, __u32);
	__type(value, struct stats);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_BRACKETS * NBUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_BRACKETS);
	__type(key, __u32);
	__type(value, struct last);
} lasts SEC(".maps");

// partner[K] = 1 + the bracket whose per-packet gap bracket K divides by its own (0: none); the
// loader fills it. The reference bracket's partner is the firewall's bracket: the same packet's
// firewall time / its reference time, packet by packet
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_BRACKETS);
	__type(key, __u32);
	__type(value, __u32);
} partner SEC(".maps");

// drop_mark[K] = the mark whose packets leave_K drops (0: none, the default); the loader fills it
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_BRACKETS);
	__type(key, __u32);
	__type(value, __u32);
} drop_mark SEC(".maps");

// per-packet ratios partner gap / own gap, x 2^RATIO_SHIFT, in the gap histogram's buckets
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_BRACKETS * NBUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} ratio_hist SEC(".maps");

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

static __always_inline __u32 bucket_of(__u64 v)
{
	__u32 e, idx;

	if (v < 2 * SUB)
		return (__u32)v;
	e = log2_u64(v);  // >= SUB_BITS + 1
	if (e - (SUB_BITS + 1) >= OCTAVES)
		return NBUCKETS - 1;
	idx = (e - SUB_BITS + 1) * SUB + (__u32)((v >> (e - SUB_BITS)) - SUB);
	return idx < NBUCKETS ? idx : NBUCKETS - 1;
}

static __always_inline int on_enter(struct bpf_nf_ctx *ctx, __u32 k)
{
	struct slot *s = bpf_map_lookup_elem(&slots, &k);
	struct stats *st = bpf_map_lookup_elem(&stats, &k);

	if (!s || !st)
		return NF_ACCEPT;
	if (s->skb)
		st->unfinished++;
	st->entered++;
	s->skb = (__u64)ctx->skb;
	s->t_ns = bpf_ktime_get_ns();  // last: the gap starts as this program ends
	return NF_ACCEPT;
}

static __always_inline void time_leave(struct bpf_nf_ctx *ctx, __u32 k, __u64 now)
{
	struct slot *s = bpf_map_lookup_elem(&slots, &k);
	struct stats *st = bpf_map_lookup_elem(&stats, &k);
	__u64 d, r, *h;
	__u32 key, pk, *p;
	struct last *l;

	if (!s || !st)
		return;
	if (!s->skb || s->skb != (__u64)ctx->skb) {
		st->unmatched++;
		return;
	}
	d = now - s->t_ns;
	s->skb = 0;
	st->left++;
	st->sum_ns += d;
	if (d > st->max_ns)
		st->max_ns = d;
	key = k * NBUCKETS + bucket_of(d);
	h = bpf_map_lookup_elem(&hist, &key);
	if (h)
		(*h)++;
	l = bpf_map_lookup_elem(&lasts, &k);
	if (l) {
		l->skb = (__u64)ctx->skb;
		l->gap_ns = d;
	}
	p = bpf_map_lookup_elem(&partner, &k);
	if (!p || !*p || *p > MAX_BRACKETS || !d)
		return;
	pk = *p - 1;
	l = bpf_map_lookup_elem(&lasts, &pk);
	if (!l || l->skb != (__u64)ctx->skb)
		return;
	r = (l->gap_ns << RATIO_SHIFT) / d;
	st->paired++;
	st->ratio_sum += r;
	key = k * NBUCKETS + bucket_of(r);
	h = bpf_map_lookup_elem(&ratio_hist, &key);
	if (h)
		(*h)++;
}

static __always_inline int on_leave(struct bpf_nf_ctx *ctx, __u32 k)
{
	__u64 now = bpf_ktime_get_ns();  // first: the gap ends as this program starts
	struct stats *st;
	__u32 *m;

	time_leave(ctx, k, now);
	m = bpf_map_lookup_elem(&drop_mark, &k);
	if (!m || !*m || ctx->skb->mark != *m)
		return NF_ACCEPT;
	st = bpf_map_lookup_elem(&stats, &k);
	if (st)
		st->dropped++;
	return NF_DROP;
}

#define BRACKET(k)                                                                              \
	SEC("netfilter") int enter_##k(struct bpf_nf_ctx *ctx) { return on_enter(ctx, k); }   \
	SEC("netfilter") int leave_##k(struct bpf_nf_ctx *ctx) { return on_leave(ctx, k); }

BRACKET(0) BRACKET(1) BRACKET(2) BRACKET(3) BRACKET(4) BRACKET(5) BRACKET(6) BRACKET(7)
BRACKET(8) BRACKET(9) BRACKET(10) BRACKET(11) BRACKET(12) BRACKET(13) BRACKET(14) BRACKET(15)
BRACKET(16) BRACKET(17) BRACKET(18) BRACKET(19) BRACKET(20) BRACKET(21) BRACKET(22) BRACKET(23)
BRACKET(24) BRACKET(25) BRACKET(26) BRACKET(27) BRACKET(28) BRACKET(29) BRACKET(30) BRACKET(31)

char _license[] SEC("license") = "GPL";

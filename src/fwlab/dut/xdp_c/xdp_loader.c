// fwlab-xdp: loads fwlab's XDP firewall (xdp_filter.bpf.c), fills its maps, attaches it to the
// DUT's ingress interfaces, reads its counters, lists it and detaches it. Run inside the DUT's
// network namespace (ip netns exec). Nothing is pinned: the attached program holds its maps, so
// detaching it (or deleting the namespace's interfaces) frees everything.
//
//   fwlab-xdp load OBJ PROGRAM native|generic|auto DEV...   rule set on stdin (see below)
//   fwlab-xdp detach DEV...        remove any XDP program (native and generic) from DEV
//   fwlab-xdp show DEV             "prog_id N", "name X", "tag HEX", "mode native|generic", "jited 0|1"
//   fwlab-xdp counters DEV         "SLOT PACKETS" for every slot with packets (summed over CPUs)
//   fwlab-xdp dump DEV             the loaded program, its config, rules array and deny hash as text
//   fwlab-xdp load OBJ PROGRAM testrun SRC DST PROTO DPORT REPEAT   rule set on stdin: load without
//                                  attaching, run the program REPEAT times on one frame
//                                  (BPF_PROG_TEST_RUN); prints "verdict pass|drop", "duration_ns N"
//
// Rule set text (one item per line, '#' starts a comment):
//   family 4|6
//   rule SLOT pass|drop PROTO SRC/PLEN DST/PLEN PORTLO-PORTHI   (into the rules array, in order)
//   deny SLOT PROTO SRC DPORT                                   (into the deny hash)
// load prints "prog_id N", "tag HEX", "mode M" and, when native was refused, "native_error MSG".
// Build: clang -O2 -Wall xdp_loader.c -lbpf -o fwlab-xdp
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#define ACT_PASS 1
#define ACT_DROP 2

struct rule {
	__u32 src[4], smask[4], dst[4], dmask[4];
	__u16 dport_lo, dport_hi;
	__u8 proto;
	__u8 action;
	__u16 pad;
	__u32 slot;
};

struct deny_key {
	__u32 src[4];
	__u16 dport;
	__u8 proto;
	__u8 pad;
};

struct config {
	__u32 nrules;
	__u32 family;
};

static void die(const char *what, int err)
{
	fprintf(stderr, "fwlab-xdp: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

static void fail(const char *msg, const char *arg)
{
	fprintf(stderr, "fwlab-xdp: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
	exit(1);
}

static int ifindex_of(const char *dev)
{
	int i = if_nametoindex(dev);
	if (!i)
		fail("no such interface", dev);
	return i;
}

/* "ADDR/PLEN" or "ADDR" (host prefix) -> address and mask words in network order */
static void parse_prefix(const char *s, int family, __u32 addr[4], __u32 mask[4])
{
	char buf[80];
	char *slash;
	int plen = family == 4 ? 32 : 128, i;
	unsigned char m[16] = {0};

	snprintf(buf, sizeof buf, "%s", s);
	slash = strchr(buf, '/');
	if (slash) {
		*slash = 0;
		plen = atoi(slash + 1);
	}
	memset(addr, 0, 16);
	if (inet_pton(family == 4 ? AF_INET : AF_INET6, buf, addr) != 1)
		fail("bad address", s);
	if (plen < 0 || plen > (family == 4 ? 32 : 128))
		fail("bad prefix length", s);
	for (i = 0; i < plen; i++)
		m[i / 8] |= 0x80 >> (i % 8);
	memcpy(mask, m, 16);
	for (i = 0; i < 4; i++)
		addr[i] &= mask[i];
}

static int proto_num(const char *s)
{
	if (!strcmp(s, "tcp"))
		return 6;
	if (!strcmp(s, "udp"))
		return 17;
	if (!strcmp(s, "any"))
		return 0;
	return atoi(s);
}

static char *read_all(FILE *f)
{
	size_t cap = 1 << 16, len = 0, n;
	char *buf = malloc(cap);
	while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len < 2) {
			cap *= 2;
			buf = realloc(buf, cap);
		}
	}
	if (!buf)
		fail("out of memory", NULL);
	buf[len] = 0;
	return buf;
}

static int update_batch(int fd, void *keys, void *vals, __u32 n, size_t ksz, size_t vsz)
{
	__u32 done = 0, count;
	int err;

	while (done < n) {
		count = n - done;
		err = bpf_map_update_batch(fd, (char *)keys + done * ksz, (char *)vals + done * vsz, &count, NULL);
		if (err && (errno == EINVAL || errno == ENOTSUP || errno == EOPNOTSUPP) && done == 0) {
			/* kernel without batch ops: one by one */
			for (__u32 i = 0; i < n; i++)
				if (bpf_map_update_elem(fd, (char *)keys + i * ksz, (char *)vals + i * vsz, BPF_ANY))
					return -errno;
			return 0;
		}
		if (err)
			return -errno;
		done += count;
	}
	return 0;
}

/* Run the loaded program on one synthetic frame REPEAT times in the kernel (BPF_PROG_TEST_RUN):
 * prints the verdict and the mean run time per frame [ns]. Measures the program alone, not the
 * data path around it. */
static int cmd_testrun_fd(int prog_fd, int family, char **a, int n)
{
	unsigned char pkt[128] = {0};
	int len, proto, dport, repeat, err;
	LIBBPF_OPTS(bpf_test_run_opts, o);

	if (n != 5)
		fail("testrun needs SRC DST PROTO DPORT REPEAT", NULL);
	proto = proto_num(a[2]);
	dport = atoi(a[3]);
	repeat = atoi(a[4]);
	/* Ethernet: zero MACs, then the ethertype */
	pkt[12] = family == 4 ? 0x08 : 0x86;
	pkt[13] = family == 4 ? 0x00 : 0xdd;
	if (family == 4) {
		unsigned char *ip = pkt + 14, *l4 = ip + 20;
		ip[0] = 0x45;
		ip[3] = 28;
		ip[8] = 64;
		ip[9] = proto;
		if (inet_pton(AF_INET, a[0], ip + 12) != 1 || inet_pton(AF_INET, a[1], ip + 16) != 1)
			fail("bad address", a[0]);
		l4[0] = 0x30; l4[1] = 0x39; /* source port 12345 */
		l4[2] = dport >> 8; l4[3] = dport & 0xff;
		l4[5] = 8;
		len = 14 + 20 + 8 + 18; /* padded to a 64-byte frame without FCS */
	} else {
		unsigned char *ip = pkt + 14, *l4 = ip + 40;
		ip[0] = 0x60;
		ip[5] = 8;
		ip[6] = proto;
		ip[7] = 64;
		if (inet_pton(AF_INET6, a[0], ip + 8) != 1 || inet_pton(AF_INET6, a[1], ip + 24) != 1)
			fail("bad address", a[0]);
		l4[0] = 0x30; l4[1] = 0x39;
		l4[2] = dport >> 8; l4[3] = dport & 0xff;
		l4[5] = 8;
		len = 14 + 40 + 8;
	}
	o.data_in = pkt;
	o.data_size_in = len;
	o.repeat = repeat > 0 ? repeat : 1;
	err = bpf_prog_test_run_opts(prog_fd, &o);
	if (err)
		die("BPF_PROG_TEST_RUN", err);
	printf("verdict %s\nduration_ns %u\nrepeat %d\n", o.retval == 2 ? "pass" : o.retval == 1 ? "drop" : "other",
	       o.duration, o.repeat);
	return 0;
}

static int cmd_load(int argc, char **argv)
{
	const char *obj_path = argv[0], *prog_name = argv[1], *mode = argv[2];
	int testrun = !strcmp(mode, "testrun");
	char *text = read_all(stdin), *line, *save = NULL;
	struct rule *rules;
	struct deny_key *dkeys;
	__u32 *dvals, nrules = 0, ndeny = 0, maxslot = 1, *rkeys, i;
	int family = 0, lines = 0;
	struct bpf_object *obj;
	struct bpf_program *prog, *p;
	struct config cfg;
	int prog_fd, err, ndev = argc - 3, native_err = 0;
	__u32 zero = 0;
	struct bpf_prog_info info = {};
	__u32 info_len = sizeof info;
	const char *used = "generic";

	if (ndev < 1)
		fail("load needs at least one interface (testrun: SRC DST PROTO DPORT REPEAT)", NULL);
	for (char *c = text; *c; c++)
		lines += *c == '\n';
	rules = calloc(lines + 1, sizeof *rules);
	dkeys = calloc(lines + 1, sizeof *dkeys);
	dvals = calloc(lines + 1, sizeof *dvals);
	if (!rules || !dkeys || !dvals)
		fail("out of memory", NULL);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char kind[16], a[64], b[64], c[80], d[80], e[40];
		char *hash = strchr(line, '#');
		unsigned slot = 0;
		int n;

		if (hash)
			*hash = 0;
		n = sscanf(line, "%15s %63s %63s %79s %79s %39s", kind, a, b, c, d, e);
		if (n <= 0)
			continue;
		if (!strcmp(kind, "family") && n == 2) {
			family = atoi(a);
			if (family != 4 && family != 6)
				fail("family must be 4 or 6", a);
		} else if (!strcmp(kind, "rule")) {
			char act[16], sp[80], dp[80], ports[40];
			struct rule *r = &rules[nrules];
			unsigned lo = 0, hi = 0;
			if (!family)
				fail("'family' must come before the rules", NULL);
			if (sscanf(line, "%*s %u %15s %63s %79s %79s %39s", &slot, act, a, sp, dp, ports) != 6 ||
			    sscanf(ports, "%u-%u", &lo, &hi) != 2 || lo > hi || hi > 65535)
				fail("bad rule line", line);
			r->slot = slot;
			r->action = !strcmp(act, "pass") ? ACT_PASS : !strcmp(act, "drop") ? ACT_DROP : 0;
			if (!r->action)
				fail("action must be pass or drop", act);
			r->proto = proto_num(a);
			parse_prefix(sp, family, r->src, r->smask);
			parse_prefix(dp, family, r->dst, r->dmask);
			r->dport_lo = lo;
			r->dport_hi = hi;
			nrules++;
		} else if (!strcmp(kind, "deny")) {
			__u32 mask[4];
			unsigned port;
			if (!family)
				fail("'family' must come before the rules", NULL);
			if (sscanf(line, "%*s %u %63s %79s %u", &slot, a, c, &port) != 4 || port > 65535)
				fail("bad deny line", line);
			if (strchr(c, '/'))
				fail("deny entries of the map program are host addresses (no /prefix)", c);
			parse_prefix(c, family, dkeys[ndeny].src, mask);
			dkeys[ndeny].proto = proto_num(a);
			dkeys[ndeny].dport = port;
			dvals[ndeny] = slot;
			ndeny++;
		} else {
			fail("unknown line", line);
		}
		if (slot + 1 > maxslot)
			maxslot = slot + 1;
	}
	if (!family)
		fail("the rule set names no family", NULL);

	obj = bpf_object__open_file(obj_path, NULL);
	if (!obj)
		die(obj_path, errno);
	prog = bpf_object__find_program_by_name(obj, prog_name);
	if (!prog)
		fail("no such program in the object", prog_name);
	bpf_object__for_each_program(p, obj)
		bpf_program__set_autoload(p, p == prog);
	bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "rules"), nrules ? nrules : 1);
	bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "deny"), ndeny ? ndeny : 1);
	bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "counters"), maxslot + 1);
	err = bpf_object__load(obj);
	if (err)
		die("loading the BPF object (verifier log above)", err);
	prog_fd = bpf_program__fd(prog);

	rkeys = calloc(nrules + 1, sizeof *rkeys);
	for (i = 0; i < nrules; i++)
		rkeys[i] = i;
	if (nrules && (err = update_batch(bpf_map__fd(bpf_object__find_map_by_name(obj, "rules")), rkeys, rules,
					  nrules, sizeof *rkeys, sizeof *rules)))
		die("filling the rules array", err);
	if (ndeny && (err = update_batch(bpf_map__fd(bpf_object__find_map_by_name(obj, "deny")), dkeys, dvals,
					 ndeny, sizeof *dkeys, sizeof *dvals)))
		die("filling the deny hash", err);
	cfg.nrules = nrules;
	cfg.family = family;
	if (bpf_map_update_elem(bpf_map__fd(bpf_object__find_map_by_name(obj, "config")), &zero, &cfg, BPF_ANY))
		die("writing the config", errno);

	if (testrun)
		return cmd_testrun_fd(prog_fd, family, argv + 3, ndev);
	/* replace whatever is attached (native and generic cannot be attached together): for a moment
	 * the interfaces have no filter, which is why fwlab loads rule sets between trials only */
	for (int k = 0; k < ndev; k++) {
		bpf_xdp_detach(ifindex_of(argv[3 + k]), XDP_FLAGS_DRV_MODE, NULL);
		bpf_xdp_detach(ifindex_of(argv[3 + k]), XDP_FLAGS_SKB_MODE, NULL);
	}
	if (strcmp(mode, "generic")) {
		used = "native";
		for (int k = 0; k < ndev; k++) {
			err = bpf_xdp_attach(ifindex_of(argv[3 + k]), prog_fd, XDP_FLAGS_DRV_MODE, NULL);
			if (err) {
				native_err = err;
				for (int j = 0; j < k; j++)
					bpf_xdp_detach(ifindex_of(argv[3 + j]), XDP_FLAGS_DRV_MODE, NULL);
				if (!strcmp(mode, "native"))
					die("attaching in native mode", err);
				used = "generic";
				break;
			}
		}
	}
	if (!strcmp(used, "generic")) {
		for (int k = 0; k < ndev; k++) {
			err = bpf_xdp_attach(ifindex_of(argv[3 + k]), prog_fd, XDP_FLAGS_SKB_MODE, NULL);
			if (err) {
				for (int j = 0; j < k; j++)
					bpf_xdp_detach(ifindex_of(argv[3 + j]), XDP_FLAGS_SKB_MODE, NULL);
				die("attaching in generic mode", err);
			}
		}
	}
	if (bpf_obj_get_info_by_fd(prog_fd, &info, &info_len))
		die("reading the program info", errno);
	printf("prog_id %u\ntag ", info.id);
	for (i = 0; i < 8; i++)
		printf("%02x", info.tag[i]);
	printf("\nmode %s\nrules %u\ndeny %u\njited %d\n", used, nrules, ndeny, info.jited_prog_len > 0);
	if (native_err)
		printf("native_error %s\n", strerror(-native_err));
	bpf_object__close(obj); /* the attachment keeps the program and its maps */
	return 0;
}

static __u32 attached_id(const char *dev, const char **mode)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);
	int err = bpf_xdp_query(ifindex_of(dev), 0, &q);
	if (err)
		die("querying XDP", err);
	*mode = q.drv_prog_id ? "native" : q.skb_prog_id ? "generic" : "none";
	return q.drv_prog_id ? q.drv_prog_id : q.skb_prog_id;
}

static int map_fd_named(int prog_fd, const char *name, struct bpf_map_info *out)
{
	__u32 ids[16], i;
	struct bpf_prog_info info = {};
	__u32 len = sizeof info;

	info.nr_map_ids = 16;
	info.map_ids = (__u64)(unsigned long)ids;
	if (bpf_obj_get_info_by_fd(prog_fd, &info, &len))
		die("reading the program info", errno);
	for (i = 0; i < info.nr_map_ids && i < 16; i++) {
		int fd = bpf_map_get_fd_by_id(ids[i]);
		__u32 mlen = sizeof *out;
		memset(out, 0, sizeof *out);
		if (fd < 0)
			continue;
		if (!bpf_obj_get_info_by_fd(fd, out, &mlen) && !strcmp(out->name, name))
			return fd;
		close(fd);
	}
	return -1;
}

static int prog_fd_on(const char *dev, const char **mode, int required)
{
	__u32 id = attached_id(dev, mode);
	int fd;
	if (!id) {
		if (required)
			fail("no XDP program is attached to", dev);
		return -1;
	}
	fd = bpf_prog_get_fd_by_id(id);
	if (fd < 0)
		die("opening the attached program", errno);
	return fd;
}

static int cmd_show(const char *dev)
{
	const char *mode;
	int fd = prog_fd_on(dev, &mode, 0), i;
	struct bpf_prog_info info = {};
	__u32 len = sizeof info;

	if (fd < 0) {
		printf("mode none\n");
		return 0;
	}
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		die("reading the program info", errno);
	printf("prog_id %u\nname %s\ntag ", info.id, info.name);
	for (i = 0; i < 8; i++)
		printf("%02x", info.tag[i]);
	printf("\nmode %s\njited %d\n", mode, info.jited_prog_len > 0);
	return 0;
}

static int cmd_counters(const char *dev)
{
	const char *mode;
	int pfd = prog_fd_on(dev, &mode, 1), fd, ncpu = libbpf_num_possible_cpus();
	struct bpf_map_info mi;
	__u64 *vals = calloc(ncpu, sizeof *vals);
	__u32 k;

	fd = map_fd_named(pfd, "counters", &mi);
	if (fd < 0) { /* xdp_pass, or not fwlab's program: nothing to count */
		printf("# no counters map\n");
		return 0;
	}
	for (k = 0; k < mi.max_entries; k++) {
		__u64 sum = 0;
		if (bpf_map_lookup_elem(fd, &k, vals))
			die("reading a counter", errno);
		for (int c = 0; c < ncpu; c++)
			sum += vals[c];
		if (sum)
			printf("%u %llu\n", k, (unsigned long long)sum);
	}
	return 0;
}

static void print_addr(int family, const __u32 a[4], const __u32 m[4])
{
	char buf[INET6_ADDRSTRLEN];
	int plen = 0;
	for (int i = 0; i < (family == 4 ? 1 : 4); i++)
		plen += __builtin_popcount(m[i]);
	inet_ntop(family == 4 ? AF_INET : AF_INET6, a, buf, sizeof buf);
	printf("%s/%d", buf, plen);
}

static int cmd_dump(const char *dev)
{
	const char *mode;
	int pfd = prog_fd_on(dev, &mode, 1), fd, i;
	struct bpf_map_info mi;
	struct bpf_prog_info info = {};
	__u32 len = sizeof info, zero = 0, k;
	struct config cfg = {};
	struct rule r;

	if (bpf_obj_get_info_by_fd(pfd, &info, &len))
		die("reading the program info", errno);
	printf("program %s tag ", info.name);
	for (i = 0; i < 8; i++)
		printf("%02x", info.tag[i]);
	printf(" mode %s\n", mode);
	fd = map_fd_named(pfd, "config", &mi);
	if (fd < 0) {
		printf("no maps\n");
		return 0;
	}
	bpf_map_lookup_elem(fd, &zero, &cfg);
	printf("family %u\n", cfg.family);
	fd = map_fd_named(pfd, "rules", &mi);
	for (k = 0; fd >= 0 && k < cfg.nrules && k < mi.max_entries; k++) {
		if (bpf_map_lookup_elem(fd, &k, &r))
			die("reading a rule", errno);
		printf("rule %u %s %u ", r.slot, r.action == ACT_PASS ? "pass" : "drop", r.proto);
		print_addr(cfg.family, r.src, r.smask);
		printf(" ");
		print_addr(cfg.family, r.dst, r.dmask);
		printf(" %u-%u\n", r.dport_lo, r.dport_hi);
	}
	fd = map_fd_named(pfd, "deny", &mi);
	if (fd >= 0) {
		struct deny_key key, next, *prev = NULL;
		__u32 full[4] = {~0u, ~0u, ~0u, ~0u}, slot;
		while (!bpf_map_get_next_key(fd, prev, &next)) {
			if (!bpf_map_lookup_elem(fd, &next, &slot)) {
				printf("deny %u %u ", slot, next.proto);
				print_addr(cfg.family, next.src, full);
				printf(" %u\n", next.dport);
			}
			key = next;
			prev = &key;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 6 && !strcmp(argv[1], "load"))
		return cmd_load(argc - 2, argv + 2);
	if (argc >= 3 && !strcmp(argv[1], "detach")) {
		for (int k = 2; k < argc; k++) {
			int ifi = ifindex_of(argv[k]);
			bpf_xdp_detach(ifi, XDP_FLAGS_DRV_MODE, NULL);
			bpf_xdp_detach(ifi, XDP_FLAGS_SKB_MODE, NULL);
		}
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "show"))
		return cmd_show(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "counters"))
		return cmd_counters(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "dump"))
		return cmd_dump(argv[2]);
	fprintf(stderr, "usage: fwlab-xdp load OBJ PROGRAM native|generic|auto DEV... < rules\n"
			"       fwlab-xdp detach|show|counters|dump DEV\n");
	return 2;
}

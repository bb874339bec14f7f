// fwlab-kclock: attaches fwlab's in-kernel clock (kclock.bpf.c) to netfilter hooks of the network
// namespace it runs in (run it with ip netns exec), holds it for a bounded time, then detaches it
// and prints what it measured as one JSON object. Nothing is pinned: when this process ends, for
// any reason, its links close and the hooks are gone.
//
//   fwlab-kclock [--ready-file PATH] [--stdin] OBJ MAX_S K:PF:HOOK:PRIO_ENTER:PRIO_LEAVE[:PARTNER[:DROP_MARK]]...
//
// Each bracket K (0..31) links enter_K at PRIO_ENTER and leave_K at PRIO_LEAVE on netfilter
// family PF (2 = IPv4, 10 = IPv6, 7 = bridge) and hook HOOK (0 prerouting, 1 input, 2 forward,
// 3 output, 4 postrouting). With PARTNER, bracket K also keeps the per-packet ratio PARTNER's gap /
// K's gap of each packet both timed (PARTNER earlier on the same hook; -1: none). With DROP_MARK
// (a non-zero packet mark, decimal), leave_K drops the packets carrying that mark after timing
// them (a marked copy's drop verdict) and counts them ("dropped"). A bracket the kernel refuses is reported with its errno and message;
// the others still run. After attaching it prints "ready" on a line of its own (stdout, flushed)
// and creates the ready file if one is named, then holds the links until MAX_S seconds have
// passed, SIGTERM/SIGINT arrives or (with --stdin) a line or end of file arrives on stdin; then it
// closes the links, reads the maps (summed over CPUs) and prints the JSON on one line.
//
//   fwlab-kclock progstats PROG_ID...   run time and count of BPF programs (kernel.bpf_stats_enabled
//                                        must be 1 for them to count), or
//   fwlab-kclock [--ready-file PATH] progstats-hold MAX_S PROG_ID...   turns the run-time
//       statistics on (BPF_ENABLE_STATS) while it holds; prints the programs' figures before,
//       "ready", and after (on SIGTERM/SIGINT or after MAX_S)
//
// Why raw syscalls: Debian 12's libbpf 1.1 predates BPF_PROG_TYPE_NETFILTER (kernel 6.4). It
// still opens the object, relocates the maps and loads the programs once their type is set by
// number; the link is made with bpf(BPF_LINK_CREATE) directly, because libbpf 1.1's
// bpf_link_create() does not pass the netfilter fields. The numbers below are the kernel's
// (include/uapi/linux/bpf.h; checked against this kernel's BTF, /sys/kernel/btf/vmlinux).
//
// Build: clang -O2 -Wall kclock_loader.c -lbpf -o fwlab-kclock
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#define PROG_TYPE_NETFILTER 32 // BPF_PROG_TYPE_NETFILTER
#define ATTACH_NETFILTER 45    // BPF_NETFILTER
#define CMD_LINK_CREATE 28     // BPF_LINK_CREATE
#define CMD_ENABLE_STATS 32    // BPF_ENABLE_STATS
#define STATS_RUN_TIME 0       // BPF_STATS_RUN_TIME

// must match kclock.bpf.c (checked against the hist map's size at load)
#define MAX_BRACKETS 32
#define SUB 64
#define OCTAVES 25
#define NBUCKETS (2 * SUB + OCTAVES * SUB)
#define RATIO_SHIFT 16

struct slot {
	__u64 skb, t_ns;
};
struct stats {
	__u64 entered, left, sum_ns, unfinished, unmatched, max_ns, paired, ratio_sum, dropped;
};

// the link_create part of union bpf_attr, netfilter variant; the rest of the union stays zero
union nf_link_attr {
	struct {
		__u32 prog_fd;
		__u32 target_fd;
		__u32 attach_type;
		__u32 flags;
		__u32 pf;
		__u32 hooknum;
		__s32 priority;
		__u32 nf_flags;
	} lc;
	__u8 pad[144];
};

struct bracket {
	int id, pf, hook, prio_enter, prio_leave, partner;
	unsigned int drop_mark; // 0: none
	int enter_fd, leave_fd; // link fds (-1: none)
	int err;                // errno of the first failure (0: attached)
	char what[64];          // which step failed
};

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	got_signal = sig;
}

static void fail(const char *msg, const char *arg)
{
	fprintf(stderr, "fwlab-kclock: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
	exit(1);
}

static int nf_link(int prog_fd, int pf, int hook, int prio)
{
	union nf_link_attr a;

	memset(&a, 0, sizeof a);
	a.lc.prog_fd = prog_fd;
	a.lc.attach_type = ATTACH_NETFILTER;
	a.lc.pf = pf;
	a.lc.hooknum = hook;
	a.lc.priority = prio;
	return syscall(__NR_bpf, CMD_LINK_CREATE, &a, sizeof a);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return level == LIBBPF_WARN ? vfprintf(stderr, fmt, ap) : 0;
}

// wait until max_s passed, stdin has a line or EOF, or a signal; returns why
static const char *hold(double max_s, int watch_stdin)
{
	double end = now_s() + max_s;
	struct pollfd p = {.fd = watch_stdin ? 0 : -1, .events = POLLIN};

	for (;;) {
		double left = end - now_s();
		int r;

		if (got_signal)
			return "signal";
		if (left <= 0)
			return "time";
		r = poll(&p, 1, (int)(left * 1000) + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r > 0)
			return p.revents & POLLIN ? "stdin" : "stdin closed";
	}
}

static void sum_percpu(int fd, __u32 key, void *buf, size_t vsz, int ncpu, __u64 *out, int nwords)
{
	memset(out, 0, nwords * sizeof(__u64));
	if (bpf_map_lookup_elem(fd, &key, buf))
		return;
	for (int c = 0; c < ncpu; c++) {
		__u64 *v = (__u64 *)((char *)buf + c * vsz);
		for (int w = 0; w < nwords; w++)
			out[w] += v[w];
	}
}

static int cmd_run(int argc, char **argv, const char *ready_file, int watch_stdin)
{
	const char *obj_path = argv[1];
	double max_s = atof(argv[2]);
	int nb = argc - 3, ncpu = libbpf_num_possible_cpus();
	struct bracket *b = calloc(nb > 0 ? nb : 1, sizeof *b);
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct bpf_map *m_stats, *m_hist;
	int used[MAX_BRACKETS] = {0}, err;
	char name[32];
	const char *why;
	double t0, t1;

	if (max_s <= 0 || max_s > 3600)
		fail("MAX_S must be in (0, 3600]", argv[2]);
	if (nb < 1)
		fail("no bracket given", NULL);
	for (int i = 0; i < nb; i++) {
		int got;
		b[i].partner = -1;
		got = sscanf(argv[3 + i], "%d:%d:%d:%d:%d:%d:%u", &b[i].id, &b[i].pf, &b[i].hook, &b[i].prio_enter,
			     &b[i].prio_leave, &b[i].partner, &b[i].drop_mark);
		if ((got != 5 && got != 6 && got != 7) || b[i].partner < -1 || b[i].id < 0 || b[i].id >= MAX_BRACKETS || used[b[i].id] ||
		    b[i].partner >= MAX_BRACKETS || b[i].partner == b[i].id)
			fail("bad bracket (K:PF:HOOK:PRIO_ENTER:PRIO_LEAVE[:PARTNER[:DROP_MARK]], K in 0..31, each K once)",
			     argv[3 + i]);
		if (b[i].prio_enter >= b[i].prio_leave)
			fail("PRIO_ENTER must be below PRIO_LEAVE", argv[3 + i]);
		used[b[i].id] = 1;
		b[i].enter_fd = b[i].leave_fd = -1;
	}
	libbpf_set_print(libbpf_quiet);
	obj = bpf_object__open_file(obj_path, NULL);
	if (!obj)
		fail("cannot open the BPF object", obj_path);
	bpf_object__for_each_program(prog, obj) {
		const char *n = bpf_program__name(prog);
		int k = -1;

		if (sscanf(n, "enter_%d", &k) != 1 && sscanf(n, "leave_%d", &k) != 1)
			k = -1;
		bpf_program__set_type(prog, PROG_TYPE_NETFILTER);
		bpf_program__set_expected_attach_type(prog, ATTACH_NETFILTER);
		bpf_program__set_autoload(prog, k >= 0 && k < MAX_BRACKETS && used[k]);
	}
	m_stats = bpf_object__find_map_by_name(obj, "stats");
	m_hist = bpf_object__find_map_by_name(obj, "hist");
	if (!m_stats || !m_hist || bpf_map__max_entries(m_hist) != MAX_BRACKETS * NBUCKETS)
		fail("the BPF object does not match this loader (maps stats/hist and their sizes)", obj_path);
	err = bpf_object__load(obj);
	if (err) {
		fprintf(stderr, "fwlab-kclock: loading the programs failed: %s\n", strerror(-err));
		printf("{\"error\": \"load: %s\"}\n", strerror(-err));
		return 1;
	}
	{
		struct bpf_map *m_partner = bpf_object__find_map_by_name(obj, "partner");
		struct bpf_map *m_drop = bpf_object__find_map_by_name(obj, "drop_mark");
		for (int i = 0; i < nb; i++) {
			__u32 key = b[i].id, val = b[i].partner + 1, mark = b[i].drop_mark;
			if (!m_partner || bpf_map_update_elem(bpf_map__fd(m_partner), &key, &val, BPF_ANY))
				fail("cannot set the brackets' partners", NULL);
			if (!m_drop || bpf_map_update_elem(bpf_map__fd(m_drop), &key, &mark, BPF_ANY))
				fail("cannot set the brackets' drop marks", NULL);
		}
	}
	for (int i = 0; i < nb; i++) {
		int fds[2] = {-1, -1};
		for (int side = 0; side < 2; side++) {
			snprintf(name, sizeof name, "%s_%d", side ? "leave" : "enter", b[i].id);
			prog = bpf_object__find_program_by_name(obj, name);
			fds[side] = nf_link(bpf_program__fd(prog), b[i].pf, b[i].hook,
					    side ? b[i].prio_leave : b[i].prio_enter);
			if (fds[side] < 0) {
				b[i].err = errno;
				snprintf(b[i].what, sizeof b[i].what, "link %s", name);
				break;
			}
		}
		if (b[i].err) {
			if (fds[0] >= 0)
				close(fds[0]);
			continue;
		}
		b[i].enter_fd = fds[0];
		b[i].leave_fd = fds[1];
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	printf("ready\n");
	fflush(stdout);
	if (ready_file) {
		FILE *f = fopen(ready_file, "w");
		if (!f)
			fail("cannot create the ready file", ready_file);
		fclose(f);
	}
	t0 = now_s();
	why = hold(max_s, watch_stdin);
	for (int i = 0; i < nb; i++) {
		// enter first: a packet between the two closes is an "unfinished" one, never a false gap
		if (b[i].enter_fd >= 0)
			close(b[i].enter_fd);
		if (b[i].leave_fd >= 0)
			close(b[i].leave_fd);
	}
	t1 = now_s();

	{
		size_t vs = 8 * ((sizeof(struct stats) + 7) / 8), vh = 8;
		void *buf = calloc(ncpu, vs > vh ? vs : vh);
		int fs = bpf_map__fd(m_stats), fh = bpf_map__fd(m_hist);
		int fr = bpf_map__fd(bpf_object__find_map_by_name(obj, "ratio_hist"));

		printf("{\"hold_s\": %.6f, \"stopped_by\": \"%s\", \"ncpu\": %d, \"sub_buckets\": %d, "
		       "\"nbuckets\": %d, \"brackets\": [", t1 - t0, why, ncpu, SUB, NBUCKETS);
		for (int i = 0; i < nb; i++) {
			__u64 st[9], c;
			int first = 1;

			printf("%s{\"id\": %d, \"pf\": %d, \"hook\": %d, \"prio_enter\": %d, \"prio_leave\": %d",
			       i ? ", " : "", b[i].id, b[i].pf, b[i].hook, b[i].prio_enter, b[i].prio_leave);
			if (b[i].err) {
				printf(", \"errno\": %d, \"error\": \"%s: %s\"}", b[i].err, b[i].what, strerror(b[i].err));
				continue;
			}
			{
				__u32 key = b[i].id;
				memset(st, 0, sizeof st);
				if (!bpf_map_lookup_elem(fs, &key, buf))
					for (int cpu = 0; cpu < ncpu; cpu++) {
						struct stats *s = (struct stats *)((char *)buf + cpu * vs);
						st[0] += s->entered;
						st[1] += s->left;
						st[2] += s->sum_ns;
						st[3] += s->unfinished;
						st[4] += s->unmatched;
						st[5] = s->max_ns > st[5] ? s->max_ns : st[5]; // max over CPUs
						st[6] += s->paired;
						st[7] += s->ratio_sum;
						st[8] += s->dropped;
					}
			}
			printf(", \"entered\": %llu, \"left\": %llu, \"sum_ns\": %llu, \"unfinished\": %llu, "
			       "\"unmatched\": %llu, \"max_ns\": %llu, \"partner\": %d, \"paired\": %llu, "
			       "\"ratio_sum\": %llu, \"ratio_shift\": %d, \"drop_mark\": %u, \"dropped\": %llu, \"per_cpu\": [",
			       (unsigned long long)st[0], (unsigned long long)st[1], (unsigned long long)st[2],
			       (unsigned long long)st[3], (unsigned long long)st[4], (unsigned long long)st[5],
			       b[i].partner, (unsigned long long)st[6], (unsigned long long)st[7], RATIO_SHIFT, b[i].drop_mark,
			       (unsigned long long)st[8]);
			// timed packets and their sum per CPU (which CPU did the firewall's work)
			for (int cpu = 0; cpu < ncpu; cpu++) {
				struct stats *s = (struct stats *)((char *)buf + cpu * vs);
				printf("%s[%llu, %llu]", cpu ? ", " : "", (unsigned long long)s->left,
				       (unsigned long long)s->sum_ns);
			}
			printf("], \"hist\": [");
			for (__u32 j = 0; j < NBUCKETS; j++) {
				sum_percpu(fh, b[i].id * NBUCKETS + j, buf, vh, ncpu, &c, 1);
				if (c) {
					printf("%s[%u, %llu]", first ? "" : ", ", j, (unsigned long long)c);
					first = 0;
				}
			}
			printf("], \"ratio_hist\": [");
			first = 1;
			for (__u32 j = 0; b[i].partner >= 0 && j < NBUCKETS; j++) {
				sum_percpu(fr, b[i].id * NBUCKETS + j, buf, vh, ncpu, &c, 1);
				if (c) {
					printf("%s[%u, %llu]", first ? "" : ", ", j, (unsigned long long)c);
					first = 0;
				}
			}
			printf("]}");
		}
		printf("]}\n");
		fflush(stdout);
	}
	bpf_object__close(obj);
	return 0;
}

// run time and count the kernel keeps per BPF program while run-time statistics are on
static int print_progstats(int n, char **ids)
{
	printf("{\"programs\": [");
	for (int i = 0; i < n; i++) {
		struct bpf_prog_info info;
		__u32 len = sizeof info;
		int fd = bpf_prog_get_fd_by_id(atoi(ids[i]));

		memset(&info, 0, sizeof info);
		printf("%s{\"id\": %d", i ? ", " : "", atoi(ids[i]));
		if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len)) {
			printf(", \"error\": \"%s\"}", strerror(errno));
		} else {
			printf(", \"name\": \"%s\", \"run_time_ns\": %llu, \"run_cnt\": %llu, \"recursion_misses\": %llu}",
			       info.name, (unsigned long long)info.run_time_ns, (unsigned long long)info.run_cnt,
			       (unsigned long long)info.recursion_misses);
		}
		if (fd >= 0)
			close(fd);
	}
	printf("]}\n");
	fflush(stdout);
	return 0;
}

static int cmd_progstats_hold(int argc, char **argv, const char *ready_file)
{
	union {
		__u32 type;
		__u8 pad[144];
	} a;
	double max_s = atof(argv[2]);
	int fd;

	memset(&a, 0, sizeof a);
	a.type = STATS_RUN_TIME;
	fd = syscall(__NR_bpf, CMD_ENABLE_STATS, &a, sizeof a);
	if (fd < 0) {
		printf("{\"error\": \"BPF_ENABLE_STATS: %s\"}\n", strerror(errno));
		return 1;
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	print_progstats(argc - 3, argv + 3); // the counts before
	printf("ready\n");
	fflush(stdout);
	if (ready_file) {
		FILE *f = fopen(ready_file, "w");
		if (!f)
			fail("cannot create the ready file", ready_file);
		fclose(f);
	}
	hold(max_s > 0 && max_s <= 3600 ? max_s : 1, 0);
	print_progstats(argc - 3, argv + 3); // and after
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	const char *ready_file = NULL;
	int watch_stdin = 0;

	while (argc >= 2 && argv[1][0] == '-' && argv[1][1] == '-') {
		if (!strcmp(argv[1], "--stdin")) {
			watch_stdin = 1;
			argv++, argc--;
		} else if (!strcmp(argv[1], "--ready-file") && argc >= 3) {
			ready_file = argv[2];
			argv += 2, argc -= 2;
		} else {
			fail("unknown option", argv[1]);
		}
	}
	if (argc >= 2 && !strcmp(argv[1], "progstats"))
		return print_progstats(argc - 2, argv + 2);
	if (argc >= 4 && !strcmp(argv[1], "progstats-hold"))
		return cmd_progstats_hold(argc, argv, ready_file);
	if (argc < 4)
		fail("usage: fwlab-kclock [--ready-file PATH] [--stdin] OBJ MAX_S K:PF:HOOK:PRIO_ENTER:PRIO_LEAVE[:PARTNER[:DROP_MARK]]... | "
		     "progstats ID... | [--ready-file PATH] progstats-hold MAX_S ID...", NULL);
	return cmd_run(argc, argv, ready_file, watch_stdin);
}

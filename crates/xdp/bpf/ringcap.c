// SPDX-License-Identifier: GPL-2.0 OR MIT
// ringcap's XDP programs, built by crates/xdp/build.rs with Debian's clang and libbpf headers.
// They use no tracepoint and no helper newer than Linux 5.3, so they load where xdp-tools 1.3.1's do not.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

// One AF_XDP socket per receive queue; ringcap sizes it to the interface's queue count when loading.
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

// What the counting programs saw: [0] packets, [1] bytes; per CPU, so no atomic on the hot path.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} seen SEC(".maps");

static __always_inline void count(struct xdp_md *ctx)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&seen, &k);
	if (v)
		*v += 1;
	k = 1;
	v = bpf_map_lookup_elem(&seen, &k);
	if (v)
		*v += ctx->data_end - ctx->data;
}

// The XDP prefilter (crates/xdp/src/prefilter.rs writes it; the layout is PrefilterMap there): when the
// tcpdump expression is an and/or of 5-tuple terms, a few OR'ed rules that tell frames which cannot match
// from those which might. It only has to be a superset of the expression: user space runs the full filter on
// every frame it gets, so whatever is unsure (IPv6, ARP, short frames, odd headers) goes to the socket.
#define PREFILTER_RULES 8
#define PREFILTER_TESTS 2

// A frame's class, as a rule's `protos` bit mask names the ones it accepts.
#define CLASS_TCP (1u << 0)
#define CLASS_UDP (1u << 1)
#define CLASS_ICMP (1u << 2)
#define CLASS_SCTP (1u << 3)
#define CLASS_OTHER_IP (1u << 4)
#define CLASS_NOT_IP (1u << 5)

// dir: 0 unused, 1 source, 2 destination, 3 either.
struct addr_test {
	__u32 addr; // network order, already masked
	__u32 mask; // network order
	__u32 dir;
};

struct port_test {
	__u16 port; // host order
	__u16 dir;
};

struct rule {
	__u32 protos;
	struct addr_test addrs[PREFILTER_TESTS];
	struct port_test ports[PREFILTER_TESTS];
};

struct prefilter {
	__u32 active;
	__u32 vlan; // 0: untagged terms; 1: any 802.1Q/802.1ad tag first; 2: a tag with this vid first
	__u32 vid;
	__u32 rules;
	struct rule rule[PREFILTER_RULES];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct prefilter);
} prefilter SEC(".maps");

// Frames the prefilter left to the stack (XDP_PASS), per CPU.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} left_to_stack SEC(".maps");

static __always_inline int addr_ok(const struct addr_test *t, __u32 src, __u32 dst)
{
	if (!t->dir)
		return 1;
	if ((t->dir & 1) && (src & t->mask) == t->addr)
		return 1;
	return (t->dir & 2) && (dst & t->mask) == t->addr;
}

static __always_inline int port_ok(const struct port_test *t, int known, __u16 sport, __u16 dport)
{
	if (!t->dir || !known)
		return 1;
	if ((t->dir & 1) && sport == t->port)
		return 1;
	return (t->dir & 2) && dport == t->port;
}

// 0 when the frame cannot match the expression, 1 when it might.
static __always_inline int may_match(struct xdp_md *ctx, const struct prefilter *pf)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 l3 = 14;
	if (data + 14 > end)
		return 1;
	__u16 type = bpf_ntohs(*(__u16 *)(data + 12));
	if (pf->vlan) {
		// libpcap's `vlan`: these three TPIDs, then the terms after it read 4 bytes further on.
		if (type != 0x8100 && type != 0x88a8 && type != 0x9100)
			return 0;
		if (data + 18 > end)
			return 1;
		if (pf->vlan == 2 && (bpf_ntohs(*(__u16 *)(data + 14)) & 0xfff) != pf->vid)
			return 0;
		type = bpf_ntohs(*(__u16 *)(data + 16));
		l3 = 18;
	}
	__u32 cls = CLASS_NOT_IP, src = 0, dst = 0;
	__u16 sport = 0, dport = 0;
	int ports_known = 0;
	if (type == 0x86dd || type == 0x0806 || type == 0x8035) {
		// IPv6, ARP, RARP: `udp`, `port`, `host` can match them; the prefilter does not look.
		return 1;
	} else if (type == 0x0800) {
		void *ip = data + l3;
		if (ip + 20 > end)
			return 1;
		__u32 ihl = (*(__u8 *)ip & 0xf) * 4;
		if (ihl < 20)
			return 1;
		__u8 proto = *(__u8 *)(ip + 9);
		cls = proto == 6 ? CLASS_TCP : proto == 17 ? CLASS_UDP : proto == 1 ? CLASS_ICMP :
		      proto == 132 ? CLASS_SCTP : CLASS_OTHER_IP;
		src = *(__u32 *)(ip + 12);
		dst = *(__u32 *)(ip + 16);
		// Ports only in a first fragment, as libpcap reads them; otherwise a port test counts as passed.
		if ((bpf_ntohs(*(__u16 *)(ip + 6)) & 0x1fff) == 0) {
			void *l4 = ip + ihl;
			if (l4 + 4 <= end) {
				sport = bpf_ntohs(*(__u16 *)l4);
				dport = bpf_ntohs(*(__u16 *)(l4 + 2));
				ports_known = 1;
			}
		}
	}
	for (int i = 0; i < PREFILTER_RULES; i++) {
		if (i >= pf->rules)
			break;
		const struct rule *r = &pf->rule[i];
		if (!(r->protos & cls))
			continue;
		if (!addr_ok(&r->addrs[0], src, dst) || !addr_ok(&r->addrs[1], src, dst))
			continue;
		if (!port_ok(&r->ports[0], ports_known, sport, dport) ||
		    !port_ok(&r->ports[1], ports_known, sport, dport))
			continue;
		return 1;
	}
	return 0;
}

// --source xdp: unless the prefilter says the frame cannot match, stamp it (when `stamp`: CLOCK_MONOTONIC,
// 8 bytes of metadata in front of it, which AF_XDP copies into the UMEM with the frame) and hand it to the
// socket of its receive queue. A queue without a socket passes its packets to the stack as before.
static __always_inline int to_socket(struct xdp_md *ctx, int stamp)
{
	__u64 now = stamp ? bpf_ktime_get_ns() : 0;
	count(ctx);
	__u32 k = 0;
	const struct prefilter *pf = bpf_map_lookup_elem(&prefilter, &k);
	if (pf && pf->active && !may_match(ctx, pf)) {
		// Cannot match the filter: the stack gets it, as if ringcap were not there.
		__u64 *n = bpf_map_lookup_elem(&left_to_stack, &k);
		if (n)
			*n += 1;
		return XDP_PASS;
	}
	if (stamp && bpf_xdp_adjust_meta(ctx, -(int)sizeof(__u64)) == 0) {
		void *meta = (void *)(long)ctx->data_meta;
		void *data = (void *)(long)ctx->data;
		if (meta + sizeof(__u64) <= data)
			*(__u64 *)meta = now;
	}
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}

SEC("xdp")
int ringcap_xsk(struct xdp_md *ctx)
{
	return to_socket(ctx, 1);
}

// The same without the stamp, for kernels whose verifier refuses bpf_xdp_adjust_meta to XDP programs
// (seen on a 6.18 kernel: "program of this type cannot use helper bpf_xdp_adjust_meta#54"); user space
// then stamps each batch when it takes it.
SEC("xdp")
int ringcap_xsk_unstamped(struct xdp_md *ctx)
{
	return to_socket(ctx, 0);
}

// --drop-all with --source xdp: count and drop in the driver (seed 002's offered-rate oracle).
SEC("xdp")
int ringcap_drop(struct xdp_md *ctx)
{
	count(ctx);
	return XDP_DROP;
}

// gen --backend xdp-live: run by BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES, never attached. The test
// run turns XDP_TX into a redirect to the context's ingress_ifindex, which ringcap sets to the interface to
// send on, so every run transmits the frame as given (gen builds it; nothing is rewritten here).
SEC("xdp")
int ringcap_tx(struct xdp_md *ctx)
{
	return XDP_TX;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

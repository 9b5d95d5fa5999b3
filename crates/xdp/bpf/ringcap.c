// SPDX-License-Identifier: GPL-2.0 OR MIT
// ringcap's XDP programs, built by crates/xdp/build.rs with Debian's clang and libbpf headers.
// They use no tracepoint and no helper newer than Linux 5.3, so they load where xdp-tools 1.3.1's do not.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

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

// --source xdp: stamp the frame (CLOCK_MONOTONIC, 8 bytes of metadata in front of it, which AF_XDP copies
// into the UMEM with the frame) and hand it to the socket of its receive queue. A queue without a socket
// passes its packets to the stack as before.
SEC("xdp")
int ringcap_xsk(struct xdp_md *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	count(ctx);
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(__u64)) == 0) {
		void *meta = (void *)(long)ctx->data_meta;
		void *data = (void *)(long)ctx->data;
		if (meta + sizeof(__u64) <= data)
			*(__u64 *)meta = now;
	}
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
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

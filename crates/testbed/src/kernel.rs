//! What this kernel lets even root do, asked of the kernel directly (raw `bpf(2)` calls with a two-instruction
//! program, no ringcap code), so a test can tell "ringcap refused" from "the kernel refused".

use std::io;

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
const XDP_PASS: i32 = 2;

/// `union bpf_attr`, as big as the parts used here and zero beyond (the kernel wants the tail zeroed).
#[repr(C)]
struct Attr {
    words: [u64; 16],
}

fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<i64> {
    // SAFETY: attr is a valid, zero-padded bpf_attr of the size passed; every pointer in it outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut Attr,
            std::mem::size_of::<Attr>() as u32,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Whether the kernel runs an XDP program on frames it sends for real (`BPF_PROG_TEST_RUN` with
/// `BPF_F_TEST_XDP_LIVE_FRAMES`, what `gen --backend xdp-live` needs). Some kernels refuse it with EPERM
/// even to root (a policy of the kernel or of the sandbox it runs in; seen on a 6.18 kernel here).
/// Panics on any other failure, which would be this probe's own.
pub fn allows_xdp_live_frames() -> bool {
    // r0 = XDP_PASS; exit
    let insns: [u64; 2] = [
        0xb7 | ((XDP_PASS as u32 as u64) << 32), // BPF_ALU64 | BPF_MOV | BPF_K, dst r0
        0x95,                                    // BPF_JMP | BPF_EXIT
    ];
    let license = b"GPL\0";
    let mut load = Attr { words: [0; 16] };
    load.words[0] = u64::from(BPF_PROG_TYPE_XDP) | (2u64 << 32); // prog_type, insn_cnt
    load.words[1] = insns.as_ptr() as u64;
    load.words[2] = license.as_ptr() as u64;
    let fd = bpf(BPF_PROG_LOAD, &mut load).expect("load a two-instruction XDP program") as i32;
    let mut frame = [0u8; 64];
    frame[..6].copy_from_slice(&[0xff; 6]);
    frame[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    // struct xdp_md: data, data_end, data_meta, ingress_ifindex (lo), rx_queue_index, egress_ifindex.
    let ctx: [u32; 6] = [0, 64, 0, 1, 0, 0];
    let mut run = Attr { words: [0; 16] };
    run.words[0] = fd as u32 as u64; // prog_fd, retval
    run.words[1] = 64; // data_size_in, data_size_out
    run.words[2] = frame.as_ptr() as u64;
    run.words[4] = 1; // repeat, duration
    run.words[5] = std::mem::size_of_val(&ctx) as u64; // ctx_size_in, ctx_size_out
    run.words[6] = ctx.as_ptr() as u64;
    run.words[8] = u64::from(BPF_F_TEST_XDP_LIVE_FRAMES); // flags, cpu
    let r = bpf(BPF_PROG_TEST_RUN, &mut run);
    // SAFETY: fd is the program this function loaded.
    unsafe { libc::close(fd) };
    match r {
        Ok(_) => true,
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => false,
        Err(e) => panic!("BPF_PROG_TEST_RUN with live frames failed for another reason: {e}"),
    }
}

//! Runs the real `ringcap_xsk` program with a prefilter on single frames (BPF_PROG_TEST_RUN, never attached),
//! so tests can hold the prefilter in the kernel against libpcap's verdict on the same bytes.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use aya::maps::Array;
use aya::{Ebpf, EbpfLoader};

use crate::error::XdpError;
use crate::live::{TestRunAttr, XdpMd, BPF_PROG_TEST_RUN};
use crate::prefilter::{Prefilter, PrefilterMap};
use crate::program::{left_to_stack, load_error, load_for_test_run, OBJECT, TO_SOCKET};

/// `ringcap_xsk` loaded with a prefilter, for test runs.
pub struct PrefilterProbe {
    ebpf: Ebpf,
    prog: OwnedFd,
}

impl PrefilterProbe {
    pub fn new(prefilter: &Prefilter) -> Result<PrefilterProbe, XdpError> {
        let value = prefilter.map_value().map_err(XdpError::Config)?;
        let mut ebpf = EbpfLoader::new()
            .map_max_entries("xsks", 1)
            .load(OBJECT)
            .map_err(|e| load_error("the test run", &e))?;
        let map = ebpf
            .map_mut("prefilter")
            .ok_or_else(|| XdpError::Load("map prefilter missing".into()))?;
        let mut array: Array<_, PrefilterMap> =
            Array::try_from(map).map_err(|e| XdpError::Load(e.to_string()))?;
        array
            .set(0, value, 0)
            .map_err(|e| XdpError::Load(e.to_string()))?;
        let prog = load_for_test_run(&mut ebpf, &TO_SOCKET, "the test run")?;
        Ok(PrefilterProbe { ebpf, prog })
    }

    fn left_to_stack(&self) -> Result<u64, XdpError> {
        left_to_stack(&self.ebpf)
    }

    /// Whether the program would hand `frame` (at least 14 bytes) to the socket rather than to the stack.
    pub fn may_match(&self, frame: &[u8]) -> Result<bool, XdpError> {
        let before = self.left_to_stack()?;
        let mut out = vec![0u8; frame.len() + 256];
        let mut ctx = XdpMd {
            data_end: frame.len() as u32,
            ..XdpMd::default()
        };
        let mut attr = TestRunAttr {
            prog_fd: self.prog.as_raw_fd() as u32,
            data_size_in: frame.len() as u32,
            data_in: frame.as_ptr() as u64,
            data_size_out: out.len() as u32,
            data_out: out.as_mut_ptr() as u64,
            repeat: 1,
            ctx_size_in: std::mem::size_of::<XdpMd>() as u32,
            ctx_in: &mut ctx as *mut XdpMd as u64,
            ..TestRunAttr::default()
        };
        // SAFETY: attr and the buffers it points to outlive the call; the kernel writes at most
        // data_size_out bytes to data_out.
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_PROG_TEST_RUN,
                &mut attr as *mut TestRunAttr,
                std::mem::size_of::<TestRunAttr>() as u32,
            )
        };
        if r != 0 {
            return Err(XdpError::Socket {
                what: format!(
                    "BPF_PROG_TEST_RUN of ringcap_xsk on a {}-byte frame",
                    frame.len()
                ),
                err: io::Error::last_os_error(),
            });
        }
        Ok(self.left_to_stack()? == before)
    }
}

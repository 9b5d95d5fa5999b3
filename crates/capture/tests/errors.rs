//! Set-up errors name the problem and the fix.

use capture::{CaptureError, Source, SourceConfig, SourceKind};
use testbed::{Side, Testbed, TestbedOptions};

#[test]
fn missing_interface_lists_the_ones_that_exist() {
    let tb = Testbed::new(TestbedOptions::default()).expect("testbed");
    for kind in [SourceKind::Ring, SourceKind::Copy] {
        let mut cfg = SourceConfig::new("nosuch0");
        cfg.kind = kind;
        let e = tb
            .run_in(Side::Rx, || Source::open(&cfg))
            .err()
            .expect("must fail");
        match &e {
            CaptureError::NoSuchInterface { name, available } => {
                assert_eq!(name, "nosuch0");
                let mut a = available.clone();
                a.sort();
                assert_eq!(a, vec!["lo".to_string(), tb.rx_if.clone()]);
            }
            other => panic!("wrong error: {other:?}"),
        }
        assert!(e.to_string().contains("no such interface 'nosuch0'"), "{e}");
    }
}

#[test]
fn interface_down_says_how_to_bring_it_up() {
    let tb = Testbed::new(TestbedOptions::default()).expect("testbed");
    let st = tb
        .command(Side::Rx, "ip")
        .args(["link", "set", &tb.rx_if, "down"])
        .status()
        .unwrap();
    assert!(st.success());
    let e = tb
        .run_in(Side::Rx, || Source::open(&SourceConfig::new(&tb.rx_if)))
        .err()
        .expect("must fail");
    assert!(matches!(e, CaptureError::InterfaceDown { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "interface '{0}' is down: bring it up with `ip link set {0} up`",
            tb.rx_if
        )
    );
}

/// Drop CAP_NET_RAW from this thread's effective set (capabilities are per thread on Linux).
fn drop_net_raw() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const CAP_NET_RAW: u32 = 13;
    let mut h = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: capget/capset with a v3 header and two data words, as the ABI requires.
    unsafe {
        assert_eq!(libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()), 0);
        d[0].effective &= !(1 << CAP_NET_RAW);
        assert_eq!(libc::syscall(libc::SYS_capset, &mut h, d.as_ptr()), 0);
    }
}

#[test]
fn missing_cap_net_raw_says_how_to_grant_it() {
    let tb = Testbed::new(TestbedOptions::default()).expect("testbed");
    let e = tb
        .run_in(Side::Rx, || {
            drop_net_raw();
            Source::open(&SourceConfig::new(&tb.rx_if))
        })
        .err()
        .expect("must fail without CAP_NET_RAW");
    assert!(matches!(e, CaptureError::Permission { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("CAP_NET_RAW") && msg.contains("setcap cap_net_raw,cap_net_admin+eip"),
        "{msg}"
    );
}

#[test]
fn bad_settings_are_config_errors() {
    let tb = Testbed::new(TestbedOptions::default()).expect("testbed");
    let mut cfg = SourceConfig::new(&tb.rx_if);
    cfg.ring.block_size = 3 << 20;
    let e = tb.run_in(Side::Rx, || Source::open(&cfg)).err().unwrap();
    assert!(matches!(e, CaptureError::Config(_)), "{e:?}");
    assert!(e.to_string().contains("power of two"), "{e}");
    let mut cfg = SourceConfig::new(&tb.rx_if);
    cfg.set_buffer_kib(4);
    let e = tb.run_in(Side::Rx, || Source::open(&cfg)).err().unwrap();
    assert!(e.to_string().contains("too small"), "{e}");
}

/// The interface disappearing under a running capture is an error, not an endless wait.
#[test]
fn interface_removed_mid_capture_is_reported() {
    use std::time::Duration;
    for kind in [SourceKind::Ring, SourceKind::Copy] {
        let tb = Testbed::new(TestbedOptions::default()).expect("testbed");
        let mut cfg = SourceConfig::new(&tb.rx_if);
        cfg.kind = kind;
        let mut src = tb.run_in(Side::Rx, || Source::open(&cfg)).expect("open");
        assert_eq!(
            src.for_each_batch(Duration::from_millis(10), |_| {})
                .unwrap(),
            0
        );
        let st = tb
            .command(Side::Rx, "ip")
            .args(["link", "del", &tb.rx_if])
            .status()
            .unwrap();
        assert!(st.success());
        let e = src
            .for_each_batch(Duration::from_millis(500), |_| {})
            .err()
            .unwrap_or_else(|| panic!("{kind:?}: no error after the interface went away"));
        let msg = e.to_string();
        assert!(
            msg.contains("went down or was removed") && msg.contains("Network is down"),
            "{kind:?}: {msg}"
        );
    }
}

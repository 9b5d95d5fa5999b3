use super::estimate::RUN_OVERHEAD_S;
use super::*;

const BASE: &str = r#"
title = "t"
[run]
reruns = 3
packets = 5000
placement = "single"
[factors]
method = ["ringcap", "tcpdump|gzip -1"]
rate_mbps = [100, "max"]
[quick]
reruns = 1
packets = 2000
[quick.factors]
rate_mbps = ["max"]
"#;

fn parse(text: &str) -> Result<Plan, PlanError> {
    Plan::parse(text, Path::new("."))
}

fn err(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn expansion_interleaves_reruns_in_plan_order() {
    let p = parse(BASE).unwrap();
    let runs = p.expand();
    assert_eq!(runs.len(), 3 * 2 * 2);
    let keys: Vec<(u32, &str)> = runs.iter().map(|r| (r.rerun, r.point.as_str())).collect();
    let points = [
        "method=ringcap;rate_mbps=100",
        "method=ringcap;rate_mbps=max",
        "method=tcpdump|gzip -1;rate_mbps=100",
        "method=tcpdump|gzip -1;rate_mbps=max",
    ];
    for (i, (rerun, point)) in keys.iter().enumerate() {
        assert_eq!(*rerun as usize, i / 4, "run {i}");
        assert_eq!(*point, points[i % 4], "run {i}");
        assert_eq!(runs[i].index, i);
    }
    // Levels resolve into the setup; [run] fixes placement for every run.
    assert_eq!(runs[0].setup.rate, Rate::Mbps(100.0));
    assert_eq!(runs[1].setup.rate, Rate::Max);
    assert_eq!(runs[2].setup.method, "tcpdump|gzip -1");
    assert!(runs.iter().all(|r| r.setup.placement == Placement::Single));
    assert_eq!(
        runs[3].levels,
        vec![
            ("method".to_string(), "tcpdump|gzip -1".to_string()),
            ("rate_mbps".to_string(), "max".to_string())
        ]
    );
}

#[test]
fn quick_and_command_line_overrides() {
    let p = parse(BASE).unwrap();
    let q = p.with_overrides(&Overrides {
        quick: true,
        ..Default::default()
    });
    assert_eq!((q.reruns, q.packets), (1, 2000));
    let runs = q.expand();
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|r| r.setup.rate == Rate::Max));
    let o = p.with_overrides(&Overrides {
        quick: true,
        reruns: Some(4),
        packets: Some(30_000),
        machine: Some("lab-2".into()),
    });
    assert_eq!(o.machine.as_deref(), Some("lab-2"));
    assert_eq!((o.reruns, o.packets), (4, 30_000));
    assert_eq!(o.expand().len(), 8);
    // Without --quick the [quick] section changes nothing.
    assert_eq!(p.with_overrides(&Overrides::default()).expand().len(), 12);
}

#[test]
fn defaults_and_factor_order_kept() {
    let p = parse("[factors]\nrate_pps = [1000]\nmethod = [\"dumpcap\"]\n").unwrap();
    assert_eq!(
        (p.reruns, p.packets, p.warmup_packets),
        (7, 1_000_000, 10_000)
    );
    let runs = p.expand();
    assert_eq!(runs[0].point, "rate_pps=1000;method=dumpcap");
    let s = &runs[0].setup;
    assert_eq!(
        (s.placement, s.output, s.apps),
        (Placement::Dual, Output::Disk, 1)
    );
    assert_eq!(s.dist, "fixed:46");
    assert_eq!(parse("").unwrap().expand()[0].point, "all");
}

#[test]
fn interface_section() {
    let p = parse(
        "[interface]\ncapture = \"eth1\"\ngenerator = \"ssh g {ringcap} gen -n {packets} {rate}\"\n",
    )
    .unwrap();
    let i = p.interface.unwrap();
    assert_eq!(
        (i.capture.as_str(), i.netns, i.offered),
        ("eth1", None, OfferedBy::Interface)
    );
    let e = err("[interface]\ngenerator = \"x {packets}\"\n");
    assert!(e.contains("needs capture"), "{e}");
    let e = err("[interface]\ncapture = \"eth1\"\n");
    assert!(
        e.contains("needs generator") && e.contains("{packets}"),
        "{e}"
    );
    let e = err("[interface]\ncapture = \"eth1\"\ngenerator = \"gen -n 5\"\n");
    assert!(e.contains("put {packets} in the command"), "{e}");
    let e = err("[interface]\ncapture = \"e\"\ngenerator = \"{packets}\"\noffered = \"nic\"\n");
    assert!(e.contains("expected \"interface\""), "{e}");
    let e = err("[interface]\ncapture = \"e\"\ngenerator = \"{packets}\"\nhost = \"x\"\n");
    assert!(e.contains("host"), "{e}");
}

#[test]
fn clear_errors() {
    let e = err("[factors]\nspeed = [1]\n");
    assert!(
        e.contains("unknown factor `speed`") && e.contains("rate_mbps"),
        "{e}"
    );
    let e = err("[factors]\nmethod = [\"pcapture\"]\n");
    assert!(
        e.contains("unknown method `pcapture`") && e.contains("netsniff-ng"),
        "{e}"
    );
    let e = err("[factors]\nmethod = []\n");
    assert!(e.contains("method has no levels"), "{e}");
    let e = err("[factors]\nrate_mbps = [\"fast\"]\n");
    assert!(e.contains("expected a number or \"max\""), "{e}");
    let e = err("[factors]\nrate_mbps = [100]\ngap_ns = [10]\n");
    assert!(e.contains("only one of"), "{e}");
    let e = err("[factors]\nload = [\"memcpy\"]\n");
    assert!(e.contains("memcpy:N"), "{e}");
    let e = err("[factors]\nmethod = [\"tcpdump|gzip -12\"]\n");
    assert!(e.contains("unknown method"), "{e}");
    let e = err("[run]\nrerun = 3\n");
    assert!(e.contains("unknown key `rerun`"), "{e}");
    let e = err("[factors]\napps = [1,2]\n[quick.factors]\nmethod = [\"tcpdump\"]\n");
    assert!(e.contains("not a factor of the plan"), "{e}");
    let e = err("[factors]\napps = [1,2]\n[anova]\nfactors = [\"method\"]\n");
    assert!(e.contains("`method` is not varied"), "{e}");
    let e = err("[factors]\nfilter = [\"file:no/such/file.txt\"]\n");
    assert!(e.contains("cannot read"), "{e}");
    let e = err("[factors\n");
    assert!(e.contains("not valid TOML"), "{e}");
    let e = err("[run]\napps = 2\n[factors]\napps = [1]\n");
    assert!(e.contains("both fixed"), "{e}");
}

#[test]
fn custom_methods_and_filter_files() {
    let dir = std::env::temp_dir().join(format!("ringcap-plan-test-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("f")).unwrap();
    std::fs::write(dir.join("f/x.txt"), "udp\n  and not port 53\n").unwrap();
    let text = r#"
[methods.mydump]
command = "tcpdump -i {if} -w {out}"
ready = "listening on"
[factors]
method = ["mydump", "ringcap"]
filter = ["none", "file:f/x.txt", "tcp"]
"#;
    let p = Plan::parse(text, &dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(p.methods["mydump"].count, Count::File);
    let runs = p.expand();
    assert_eq!(runs.len(), 7 * 6);
    assert_eq!(runs[0].setup.filter, None);
    assert_eq!(runs[1].setup.filter.as_deref(), Some("udp and not port 53"));
    assert_eq!(runs[1].point, "method=mydump;filter=file:f/x.txt");
    assert_eq!(runs[2].setup.filter.as_deref(), Some("tcp"));
}

#[test]
fn shipped_plans_parse() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plans");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "toml") {
            let p = Plan::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let quick = p.with_overrides(&Overrides {
                quick: true,
                ..Default::default()
            });
            assert!(
                quick.expand().len() < p.expand().len(),
                "{}",
                path.display()
            );
            n += 1;
        }
    }
    assert!(n >= 6, "{n} plans in {}", dir.display());
}

#[test]
fn burst_levels() {
    let p =
        parse("[factors]\nburst = [\"none\", \"on=2s,off=500ms\", \"on=1s,off=1s,cycles=3\"]\n")
            .unwrap();
    let runs = p.expand();
    assert_eq!(runs[0].setup.burst, None);
    let b = runs[1].setup.burst.clone().unwrap();
    assert_eq!(
        (b.on_s, b.off_s, b.cycles, b.period_s(), b.fold_s()),
        (2.0, 0.5, 5, 2.5, 2.5)
    );
    assert_eq!(b.gen_arg(), "on=2000ms,off=500ms");
    assert_eq!(runs[2].setup.burst.clone().unwrap().cycles, 3);
    // Phases (seed 002's three on-periods) come last, keep their commas and reach gen as written; the
    // time lines fold over one period per phase.
    let p = parse(
        "[factors]\nburst = [\"on=1s,off=1s,cycles=6,phases=fixed:1500@max;fixed:50@max;mix:50,186,562,754,1010,1500@pps=360000\"]\n",
    )
    .unwrap();
    let b = p.expand()[0].setup.burst.clone().unwrap();
    assert_eq!((b.cycles, b.phases.len(), b.fold_s()), (6, 3, 6.0));
    assert_eq!(
        b.gen_arg(),
        "on=1000ms,off=1000ms,phases=fixed:1500@max;fixed:50@max;mix:50,186,562,754,1010,1500@pps=360000"
    );
    for bad in [
        "on=2s",
        "on=2,off=1s",
        "on=0s,off=1s",
        "on=1s,off=1s,cycles=0",
        "fast",
        "phases=fixed:50,on=1s,off=1s",
        "on=1s,off=1s,phases=fixed:50;;imix",
    ] {
        let e = err(&format!("[factors]\nburst = [\"{bad}\"]\n"));
        assert!(e.contains("on=T,off=T"), "{bad}: {e}");
    }
}

#[test]
fn pipe_methods() {
    assert_eq!(pipe_method("tcpdump|gzip -1"), Some(1));
    assert_eq!(pipe_method("tcpdump | gzip -9"), Some(9));
    assert_eq!(pipe_method("tcpdump|zstd -3"), None);
    assert_eq!(pipe_method("tcpdump|gzip"), None);
    assert_eq!(pipe_method("dumpcap|gzip -1"), None);
}

#[test]
fn estimate_counts_overhead_and_sending_time() {
    let p = parse(
        "[run]\npackets = 100000\nwarmup_packets = 0\n[factors]\nrate_pps = [50000, 100000]\n",
    )
    .unwrap();
    let runs = p.expand();
    let est = p.estimate_seconds(&runs[..2]);
    assert!(
        (est - (2.0 * RUN_OVERHEAD_S + 2.0 + 1.0)).abs() < 1e-9,
        "{est}"
    );
}

#[test]
fn disk_section_and_its_quick_size() {
    let p = parse(
        "[disk]\nwrite_mib = 512\nblock_kib = [8, 1024]\n[quick]\ndisk_write_mib = 64\n[factors]\nsnaplen = [0, 76]\n",
    )
    .unwrap();
    let d = p.disk.as_ref().unwrap();
    assert_eq!((d.write_mib, d.block_kib.clone()), (512, vec![8, 1024]));
    let q = p.with_overrides(&Overrides {
        quick: true,
        ..Default::default()
    });
    assert_eq!(q.disk.unwrap().write_mib, 64);
    let defaults = parse("[disk]\n").unwrap().disk.unwrap();
    assert_eq!(
        (defaults.write_mib, defaults.block_kib),
        (1024, vec![8, 64, 1024])
    );
    assert!(err("[disk]\nblock_kib = [0]\n").contains("block_kib"));
    assert!(err("[disk]\nwrite_mib = 0\n").contains("write_mib"));
    assert!(err("[disk]\nsize = 1\n").contains("unknown key `size`"));
}

#[test]
fn time_sampled_runs() {
    let p = parse(
        "[run]\nsamples = 12\n[quick]\nsamples = 2\nsample_s = 0.5\nwarmup_s = 1\n[factors]\nmethod = [\"ringcap\", \"tcpdump\"]\n",
    )
    .unwrap();
    // Schultz's design by default: 10 s of warm-up, then 12 samples of 10 s.
    let sp = p.sampling.unwrap();
    assert_eq!((sp.samples, sp.sample_s, sp.warmup_s), (12, 10.0, 10.0));
    let q = p
        .with_overrides(&Overrides {
            quick: true,
            ..Default::default()
        })
        .sampling
        .unwrap();
    assert_eq!((q.samples, q.sample_s, q.warmup_s), (2, 0.5, 1.0));
    // The estimate is the send time (warm-up + samples + 0.5 s start-up) plus the fixed overhead per run.
    let runs = p.expand();
    let est = p.estimate_seconds(&runs[..1]);
    assert!((est - (RUN_OVERHEAD_S + 130.5)).abs() < 1e-9, "{est}");
    assert!(parse("[run]\nsamples = 3\n").unwrap().sampling.is_some());
    assert!(parse("[run]\n").unwrap().sampling.is_none());
    assert!(err("[run]\nsample_s = 5\n").contains("need samples"));
    assert!(err("[run]\nsamples = 0\n").contains("samples must be"));
    assert!(err("[run]\nsamples = 2\noutput = \"null\"\n").contains("output = \"disk\""));
    assert!(err("[run]\nsamples = 2\nburst = \"on=1s,off=1s\"\n").contains("burst"));
}

#[test]
fn traffic_levels() {
    let p = parse(
        "[run]\nrate_pps = 50000\nseed = 9\n[factors]\ntraffic = [\"gen\", \"synth:bmodel=0.5\", \"synth:bmodel=0.8,levels=10,concurrent=64\"]\n",
    )
    .unwrap();
    assert_eq!(p.seed, 9);
    let runs = p.expand();
    assert_eq!(runs[0].setup.traffic, Traffic::Gen);
    let Traffic::Synth(t) = &runs[2].setup.traffic else {
        panic!("{:?}", runs[2].setup.traffic)
    };
    assert_eq!(
        t.synth_args(),
        ["--bmodel", "0.8", "--levels", "10", "--concurrent", "64"]
    );
    // The default is gen's stream and seed 1.
    let p = parse("[factors]\nrate_pps = [1000]\n").unwrap();
    assert_eq!(
        (p.expand()[0].setup.traffic.clone(), p.seed),
        (Traffic::Gen, 1)
    );

    for (plan, why) in [
        ("[factors]\ntraffic = [\"synth:bmodel=1.0\"]\nrate_pps = [1000]\n", "bmodel"),
        ("[factors]\ntraffic = [\"synth:levels=3\"]\nrate_pps = [1000]\n", "bmodel is required"),
        ("[factors]\ntraffic = [\"replay\"]\n", "expected \"gen\""),
        ("[factors]\ntraffic = [\"synth:bmodel=0.7\"]\nrate_mbps = [100]\n", "rate_pps"),
        ("[factors]\ntraffic = [\"synth:bmodel=0.7\"]\nrate_pps = [1000, \"max\"]\n", "rate_pps"),
        (
            "[run]\nrate_pps = 1000\n[factors]\ntraffic = [\"synth:bmodel=0.7\"]\nburst = [\"on=1s,off=1s\"]\n",
            "burst",
        ),
    ] {
        let e = parse(plan).unwrap_err().to_string();
        assert!(e.contains(why), "{plan}: {e}");
    }
}

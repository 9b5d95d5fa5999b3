// Over 700 lines on purpose: one page, its sections in the order a reader meets them.
//! report.html: one self-contained page (plots inlined as SVG) that a person reads top to bottom.

use std::fmt::Write;
use std::path::Path;

use plot::html::{esc, svg_figure};

use super::data::{level_text, series_name, Meta, PlanInfo, PointSummary, RunResult, Stats};
use super::figures::{Figure, Layout, Section};
use super::AnovaOutcome;
use crate::anova::num;

/// Everything the page shows.
pub struct Page<'a> {
    pub dir: &'a Path,
    pub plan: &'a PlanInfo,
    pub plan_text: Option<&'a str>,
    pub meta: &'a Meta,
    pub factors: &'a [String],
    pub runs: &'a [RunResult],
    pub summaries: &'a [PointSummary],
    pub layout: &'a Layout,
    pub figures: &'a [Figure],
    pub anova: Option<&'a AnovaOutcome>,
    pub warnings: &'a [String],
    /// search.json (an empty array without one).
    pub search: &'a serde_json::Value,
}

const CSS: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1180px;padding:24px 28px;color:#1d232a;line-height:1.45}
h1{font-size:1.7em;margin:.2em 0 .3em}h2{margin-top:1.8em;border-bottom:2px solid #e3e6ea;padding-bottom:.2em}
h3{margin:1.2em 0 .3em}
.lead{font-size:1.08em}.how{background:#f4f7fa;border-left:4px solid #0072b2;padding:.6em 1em}
.muted{color:#5d6874;font-size:.92em}.warn{background:#fff6e0;border-left:4px solid #e69f00;padding:.5em 1em}
figure{margin:1.2em 0}figure svg{max-width:100%;height:auto;display:block;border:1px solid #e3e6ea}
figcaption{color:#444;font-size:.93em;margin-top:.3em}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:12px}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}
th,td{border:1px solid #d5dae0;padding:4px 8px;text-align:right;vertical-align:top}
th{background:#eef1f4}td.l,th.l{text-align:left}td:not(.l){white-space:nowrap}
tr.sig td{font-weight:600}tr.bad td{background:#fdecea}
.sub{display:block;color:#5d6874;font-size:.85em;white-space:nowrap}
pre{background:#f6f8fa;border:1px solid #e3e6ea;padding:10px;overflow:auto;font-size:.88em}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px}dt{font-weight:600}dd{margin:0}
nav a{margin-right:1em}
";

/// The page.
pub fn render(p: &Page) -> String {
    let mut h = String::new();
    let title = p
        .plan
        .title
        .clone()
        .unwrap_or_else(|| format!("Bench results in {}", p.dir.display()));
    let _ = writeln!(h, "<h1>{}</h1>", esc(&title));
    if let Some(d) = &p.plan.description {
        let _ = writeln!(h, "<p class=\"lead\">{}</p>", esc(d));
    }
    let _ = writeln!(h, "<p class=\"how\">{}</p>", esc(&how(p)));
    let _ = writeln!(h, "<p class=\"muted\">{}</p>", esc(&status(p)));
    let _ =
        writeln!(
        h,
        "<nav class=\"muted\"><a href=\"#plots\">Plots</a><a href=\"#summary\">Summary table</a>{}\
         <a href=\"#machine\">Machine and tools</a><a href=\"#plan\">Plan</a></nav>",
        if p.anova.is_some() { "<a href=\"#anova\">ANOVA</a>" } else { "" }
    );
    if !p.warnings.is_empty() {
        let _ = writeln!(h, "<div class=\"warn\"><b>Notes</b><ul>");
        for w in p.warnings {
            let _ = writeln!(h, "<li>{}</li>", esc(w));
        }
        let _ = writeln!(h, "</ul></div>");
    }

    plots(&mut h, p);
    search(&mut h, p);
    summary_table(&mut h, p);
    if let Some(a) = p.anova {
        anova(&mut h, a, p.figures);
    }
    problems(&mut h, p);
    machine(&mut h, p.meta);
    let _ = writeln!(h, "<h2 id=\"plan\">The plan as run</h2>");
    match p.plan_text {
        Some(t) => {
            let _ = writeln!(h, "<pre>{}</pre>", esc(t));
        }
        None => {
            let _ = writeln!(h, "<p>plan.toml is missing from the output directory.</p>");
        }
    }
    let _ = writeln!(
        h,
        "<p class=\"muted\">Files: results.csv (one row per run and app), summary.csv (per point and \
         metric: n, avg, min, max, median), plots/ (SVG and PNG){}. Rebuild this page with \
         <code>ringcap report {}</code>.</p>",
        if p.anova.is_some() { ", anova.json" } else { "" },
        esc(&p.dir.display().to_string())
    );
    plot::html::page(&title, CSS, &h)
}

/// The two sentences: what was measured and how.
fn how(p: &Page) -> String {
    let ok: Vec<&RunResult> = p.runs.iter().filter(|r| r.ok).collect();
    let mut gen: Vec<f64> = ok
        .iter()
        .filter_map(|r| r.values.get("generated").copied())
        .collect();
    gen.sort_by(f64::total_cmp);
    let packets = gen
        .get(gen.len() / 2)
        .map(|g| format!("about {} packets", units::si(*g, "")))
        .unwrap_or_else(|| "packets".into());
    let varying: Vec<String> = p
        .layout
        .x
        .iter()
        .chain(p.layout.series.iter())
        .chain(p.layout.panels.iter())
        .map(|&i| p.factors[i].replace('_', " "))
        .collect();
    let apps = if p.layout.multi_app {
        "several capturing apps at once"
    } else {
        "the capturer"
    };
    format!(
        "Each run sent {packets} from the traffic generator over a veth pair to {apps} in another network \
         namespace, for every combination of {} and with {} reruns each; the capture rate is the packets the \
         capturer received divided by the packets generated (eq. 6.1 of the thesis). CPU busy is 100 % minus \
         the idle share of all CPUs in /proc/stat while the generator ran, and the capturer's CPU per packet is \
         its own user + system time divided by the packets offered to the interface; plotted points are \
         averages over the reruns with bars from minimum to maximum.",
        if varying.is_empty() {
            "the plan's settings".to_string()
        } else {
            varying.join(" × ")
        },
        reruns_text(p.summaries)
    )
}

fn reruns_text(s: &[PointSummary]) -> String {
    let lo = s
        .iter()
        .map(|s| s.runs_ok + s.runs_failed)
        .min()
        .unwrap_or(0);
    let hi = s
        .iter()
        .map(|s| s.runs_ok + s.runs_failed)
        .max()
        .unwrap_or(0);
    if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}–{hi}")
    }
}

fn status(p: &Page) -> String {
    let ok = p.runs.iter().filter(|r| r.ok).count();
    let failed = p.runs.len() - ok;
    let mut s = format!(
        "{} runs of {} points ({} ok{}).",
        p.runs.len(),
        p.summaries.len(),
        ok,
        if failed > 0 {
            format!(", {failed} failed: see below")
        } else {
            String::new()
        }
    );
    if let Some(start) = &p.meta.started {
        let _ = write!(s, " Started {start}");
        match &p.meta.finished {
            Some(f) => {
                let _ = write!(s, ", finished {f}.");
            }
            None => s.push_str(
                "; not finished (interrupted or still running): this report shows the runs done so far.",
            ),
        }
    }
    if p.meta.quick == Some(true) {
        s.push_str(" Quick mode (--quick): fewer levels, reruns and packets than the full plan.");
    }
    // Said up front, not only in the problems section: the plots lack these lines.
    for l in &p.meta.skipped_levels {
        let _ = write!(
            s,
            " Not run on this machine: {} ({} runs): {}.",
            l.level, l.runs, l.reason
        );
    }
    s
}

fn plots(h: &mut String, p: &Page) {
    let _ = writeln!(h, "<h2 id=\"plots\">Plots</h2>");
    let main: Vec<&Figure> = p
        .figures
        .iter()
        .filter(|f| f.section == Section::Main)
        .collect();
    if main.is_empty() {
        let _ = writeln!(
            h,
            "<p>No plots: no successful run has a factor that varies.</p>"
        );
    }
    for f in main {
        figure(h, f);
    }
    let multi: Vec<&Figure> = p
        .figures
        .iter()
        .filter(|f| f.section == Section::MultiApp)
        .collect();
    if !multi.is_empty() {
        let _ = writeln!(
            h,
            "<h3>Several capturing apps: worst, average and best app</h3><div class=\"grid\">"
        );
        for f in multi {
            figure(h, f);
        }
        let _ = writeln!(h, "</div>");
    }
    let cpu: Vec<&Figure> = p
        .figures
        .iter()
        .filter(|f| f.section == Section::Cpu)
        .collect();
    if !cpu.is_empty() {
        let _ = writeln!(
            h,
            "<h3>Where the CPU time went</h3><p class=\"muted\">CPU busy split by mode (modes that never \
             reach 1 % are left out). softirq is the kernel's packet receive path, system the kernel on behalf \
             of the capturer (system calls, copies), user the capturer itself.</p><div class=\"grid\">"
        );
        for f in cpu {
            figure(h, f);
        }
        let _ = writeln!(h, "</div>");
    }
}

fn figure(h: &mut String, f: &Figure) {
    let caption = format!(
        "{c} <a href=\"plots/{n}.svg\">SVG</a> · <a href=\"plots/{n}.png\">PNG</a>",
        n = esc(&f.name),
        c = esc(&f.caption)
    );
    h.push_str(&svg_figure(&f.name, &f.svg, &caption));
}

/// The max loss-free rate per point (search.json of a plan with `[search]`): "how fast can it go here?".
fn search(h: &mut String, p: &Page) {
    let Some(found) = p.search.as_array().filter(|a| !a.is_empty()) else {
        return;
    };
    let _ = writeln!(
        h,
        "<h2 id=\"search\">Max loss-free rate</h2>\n<p class=\"muted\">Per point, the highest rate asked of \
         the generator at which the capturer lost less than the plan's threshold: the sweep gives the bracket, \
         then bisection runs narrow it (one run each).</p>\n<table><tr><th class=\"l\">point</th>\
         <th>max loss-free rate</th><th>measured there</th><th>loss at</th><th class=\"l\">runs</th></tr>"
    );
    for f in found {
        let factor = f["factor"].as_str().unwrap_or("rate_pps");
        let rate = |v: &serde_json::Value| {
            v.as_f64().map_or("–".to_string(), |x| {
                crate::bench::search::rate_text(factor, x)
            })
        };
        let point: Vec<String> = f["levels"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|pair| Some(level_text(pair[0].as_str()?, pair[1].as_str()?)))
            .collect();
        let probes = f["probes"].as_array().map_or(0, |a| a.len());
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{} bisection runs; {}</td></tr>",
            esc(&point.join(", ")),
            f["max_loss_free"]
                .as_f64()
                .map_or("below the lowest rate".to_string(), |x| crate::bench::search::rate_text(factor, x)),
            f["measured_pps"].as_f64().map_or("–".into(), |x| units::si(x, "pps")),
            rate(&f["lossy_at"]),
            probes,
            esc(f["note"].as_str().unwrap_or(""))
        );
    }
    let _ = writeln!(h, "</table>");
}

fn summary_table(h: &mut String, p: &Page) {
    let _ = writeln!(h, "<h2 id=\"summary\">Summary per point</h2>");
    // Factors with one level go above the table, the others get a column.
    let varying: Vec<usize> = (0..p.factors.len())
        .filter(|&i| {
            let first = p.summaries.first().map(|s| &s.levels[i]);
            p.summaries.iter().any(|s| Some(&s.levels[i]) != first)
        })
        .collect();
    let fixed: Vec<String> = (0..p.factors.len())
        .filter(|i| !varying.contains(i))
        .filter_map(|i| Some(level_text(&p.factors[i], &p.summaries.first()?.levels[i])))
        .collect();
    let _ = writeln!(
        h,
        "<p class=\"muted\">Average over the successful reruns, (min–max) below it, and the median. Failed \
         runs are counted but never averaged in.{}</p>",
        if fixed.is_empty() {
            String::new()
        } else {
            format!(" Same in every run: {}.", esc(&fixed.join(", ")))
        }
    );
    let any = |m: &str| p.summaries.iter().any(|s| s.metrics.contains_key(m));
    let multi = any("capture_rate_worst") && p.layout.multi_app;
    let _ = write!(h, "<table><tr>");
    for &i in &varying {
        let _ = write!(h, "<th class=\"l\">{}</th>", esc(&p.factors[i]));
    }
    let _ = write!(
        h,
        "<th>runs</th><th>offered (frames)</th><th>capture rate</th>"
    );
    if multi {
        let _ = write!(h, "<th>worst / avg / best app</th>");
    }
    let drops = ["drop_kernel", "drop_ring", "drop_storage"]
        .into_iter()
        .filter(|m| any(m))
        .collect::<Vec<_>>();
    if !drops.is_empty() {
        let _ = write!(h, "<th>drops (avg packets)</th>");
    }
    let throttled = any("cg_throttled_s");
    let _ = writeln!(
        h,
        "<th>capturer CPU</th>{}<th>CPU busy</th><th>CPU by mode (avg %)</th></tr>",
        if throttled {
            "<th>capturers throttled (cgroup cpu.stat)</th>"
        } else {
            ""
        }
    );
    for s in p.summaries {
        let bad = s.runs_ok == 0;
        let _ = write!(h, "<tr{}>", if bad { " class=\"bad\"" } else { "" });
        for &i in &varying {
            let _ = write!(
                h,
                "<td class=\"l\">{}</td>",
                esc(&series_name(&p.factors[i], &s.levels[i]))
            );
        }
        let runs = if s.runs_failed > 0 {
            format!(
                "{}<span class=\"sub\">{} failed</span>",
                s.runs_ok, s.runs_failed
            )
        } else {
            s.runs_ok.to_string()
        };
        let _ = write!(h, "<td>{runs}</td>");
        let offered = match (s.metrics.get("mbps"), s.metrics.get("pps")) {
            (Some(m), Some(pp)) => format!(
                "{}<span class=\"sub\">{}</span>",
                mbit(m.avg),
                units::si(pp.avg, "pps")
            ),
            (Some(m), None) => mbit(m.avg),
            (None, Some(pp)) => units::si(pp.avg, "pps"),
            _ => "–".into(),
        };
        // Schultz's line throughput (preamble, FCS and gap: 84 bytes per 60-byte frame) under the frame rate.
        let line = s.metrics.get("line_mbps").map_or(String::new(), |l| {
            format!("<span class=\"sub\">{} on the line</span>", mbit(l.avg))
        });
        let _ = write!(h, "<td>{offered}{line}</td>");
        let _ = write!(
            h,
            "<td>{}</td>",
            cell(s.metrics.get("capture_rate"), &pct01, true)
        );
        if multi {
            let v = |m: &str| s.metrics.get(m).map_or("–".into(), |st| pct01(st.avg));
            let _ = write!(
                h,
                "<td>{} / {} / {}</td>",
                v("capture_rate_worst"),
                v("capture_rate_avg"),
                v("capture_rate_best")
            );
        }
        if !drops.is_empty() {
            let parts: Vec<String> = drops
                .iter()
                .filter_map(|m| {
                    let st = s.metrics.get(*m)?;
                    Some(format!("{} {}", &m[5..], units::si(st.avg, "")))
                })
                .collect();
            let _ = write!(
                h,
                "<td>{}</td>",
                if parts.is_empty() {
                    "–".into()
                } else {
                    parts.join("<br>")
                }
            );
        }
        let _ = write!(
            h,
            "<td>{}</td>",
            cell(
                s.metrics.get("app_ns_per_pkt"),
                &|v| format!("{} ns/pkt", units::sig(v)),
                false
            )
        );
        if throttled {
            // Throttled periods out of all periods proves the quota bit; the time is how long they waited.
            let v = |m: &str| s.metrics.get(m).map(|st| st.avg);
            let text = match (v("cg_throttled_s"), v("cg_throttled"), v("cg_periods")) {
                (Some(t), Some(n), Some(all)) => format!(
                    "{} s<span class=\"sub\">{} of {} periods</span>",
                    units::sig(t),
                    units::sig(n),
                    units::sig(all)
                ),
                _ => "–".into(),
            };
            let _ = write!(h, "<td>{text}</td>");
        }
        let _ = write!(
            h,
            "<td>{}</td>",
            cell(s.metrics.get("cpu_busy"), &pct100, false)
        );
        let modes: Vec<String> = [
            ("usr", "cpu_user"),
            ("sys", "cpu_system"),
            ("irq", "cpu_irq"),
            ("sirq", "cpu_softirq"),
            ("nice", "cpu_nice"),
            ("io", "cpu_iowait"),
            ("steal", "cpu_steal"),
        ]
        .iter()
        .filter_map(|(short, m)| {
            let st = s.metrics.get(*m)?;
            (st.avg >= 0.5).then(|| format!("{short} {:.1}", st.avg))
        })
        .collect();
        let _ = writeln!(h, "<td class=\"l\">{}</td></tr>", modes.join(" · "));
    }
    let _ = writeln!(h, "</table>");
}

/// avg with (min–max) and median below.
fn cell(st: Option<&Stats>, f: &dyn Fn(f64) -> String, median: bool) -> String {
    let Some(st) = st else {
        return "–".into();
    };
    if st.n == 1 {
        return f(st.avg);
    }
    let med = if median {
        format!("<span class=\"sub\">median {}</span>", f(st.median))
    } else {
        String::new()
    };
    format!(
        "{}<span class=\"sub\">({}–{})</span>{med}",
        f(st.avg),
        f(st.min),
        f(st.max)
    )
}

fn anova(h: &mut String, a: &AnovaOutcome, figures: &[Figure]) {
    let _ = writeln!(h, "<h2 id=\"anova\">Analysis of variance</h2>");
    let (response, a) = match a {
        AnovaOutcome::NotPossible { response, reason } => {
            let _ = writeln!(
                h,
                "<p class=\"warn\">The ANOVA of {} could not be computed: {}</p>",
                esc(response),
                esc(reason)
            );
            return;
        }
        AnovaOutcome::Done { response, anova } => (response, anova),
    };
    let design: Vec<String> = a
        .factors
        .iter()
        .map(|f| {
            format!(
                "{} ({} levels: {})",
                f.name,
                f.levels.len(),
                f.levels.join(", ")
            )
        })
        .collect();
    let _ = writeln!(
        h,
        "<p>Response: <b>{}</b>{}. {}-factor full factorial design: {}; {} replications per cell, {} \
         observations (one per successful run). As in seed 004: the share of the total variation each \
         factor and interaction explains, and the F-test at {:.0} % confidence (significant rows in bold).</p>",
        esc(response),
        if a.log10 { " (analysed as log10, for effects that multiply)" } else { "" },
        a.factors.len(),
        esc(&design.join(" × ")),
        a.replications,
        a.observations,
        a.confidence * 100.0
    );
    let _ = writeln!(
        h,
        "<table><tr><th class=\"l\">Component</th><th>Sum of squares</th><th>% of variation</th>\
         <th>DF</th><th>Mean square</th><th>F computed</th><th>F table</th><th>p-value</th></tr>"
    );
    let n = a.observations;
    for (name, ss, df, pct) in [
        ("y", a.ss_y, n, ""),
        ("y..", a.ss_0, 1, ""),
        ("y − y..", a.ss_total, n.saturating_sub(1), "100.00 %"),
    ] {
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{name}</td><td>{}</td><td>{pct}</td><td>{df}</td><td></td><td></td><td></td><td></td></tr>",
            num(ss)
        );
    }
    for c in &a.components {
        let _ = writeln!(
            h,
            "<tr{}><td class=\"l\">{}</td><td>{}</td><td>{:.2} %</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            if c.significant() { " class=\"sig\"" } else { "" },
            esc(&c.name),
            num(c.ss),
            c.percent,
            c.df,
            num(c.ms),
            c.f.map(num).unwrap_or_default(),
            c.f_table.map(|t| format!("{t:.2}")).unwrap_or_default(),
            c.p.map(|p| crate::anova::pvalue(p, "&lt; ")).unwrap_or_default()
        );
    }
    let _ = writeln!(h, "</table>");
    let sig: Vec<&str> = a
        .components
        .iter()
        .filter(|c| c.significant())
        .map(|c| c.name.as_str())
        .collect();
    let _ = writeln!(
        h,
        "<p>Significant: {}. The model is valid if the residuals below scatter around zero without a trend \
         and lie near the line in the Q-Q plot (normal errors).</p><div class=\"grid\">",
        if sig.is_empty() { "none".to_string() } else { esc(&sig.join(", ")) }
    );
    for f in figures.iter().filter(|f| f.section == Section::Anova) {
        figure(h, f);
    }
    let _ = writeln!(h, "</div>");
}

fn problems(h: &mut String, p: &Page) {
    let failed: Vec<&RunResult> = p.runs.iter().filter(|r| !r.ok).collect();
    if p.meta.skipped.is_empty() && p.meta.skipped_levels.is_empty() && failed.is_empty() {
        return;
    }
    let _ = writeln!(h, "<h2 id=\"problems\">Skipped peers and failed runs</h2>");
    if !p.meta.skipped_levels.is_empty() {
        let _ = writeln!(
            h,
            "<table><tr><th class=\"l\">level not run here</th><th>runs</th><th class=\"l\">why</th></tr>"
        );
        for s in &p.meta.skipped_levels {
            let _ = writeln!(
                h,
                "<tr><td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
                esc(&s.level),
                s.runs,
                esc(&s.reason)
            );
        }
        let _ = writeln!(h, "</table>");
    }
    if !p.meta.skipped.is_empty() {
        let _ = writeln!(
            h,
            "<table><tr><th class=\"l\">not run</th><th class=\"l\">why</th></tr>"
        );
        for s in &p.meta.skipped {
            let _ = writeln!(
                h,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
                esc(&s.method),
                esc(&s.reason)
            );
        }
        let _ = writeln!(h, "</table>");
    }
    if !failed.is_empty() {
        let _ = writeln!(
            h,
            "<p>{} failed run(s); they keep their row in results.csv and are left out of every average.</p>\
             <table><tr><th>run</th><th class=\"l\">point</th><th>rerun</th><th class=\"l\">status</th></tr>",
            failed.len()
        );
        for r in failed {
            let _ = writeln!(
                h,
                "<tr class=\"bad\"><td>{}</td><td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
                r.run,
                esc(&r.point),
                r.rerun,
                esc(&r.status)
            );
        }
        let _ = writeln!(h, "</table>");
    }
}

fn machine(h: &mut String, meta: &Meta) {
    let _ = writeln!(h, "<h2 id=\"machine\">Machine and tools</h2>");
    match (meta.machine(), &meta.machine) {
        (Some(m), _) => {
            let _ = writeln!(h, "<dl>");
            let row = |h: &mut String, k: &str, v: &str| {
                let _ = writeln!(h, "<dt>{k}</dt><dd>{}</dd>", esc(v));
            };
            row(h, "CPU", &m.cpu_model);
            row(h, "CPUs online", &m.cores.to_string());
            row(
                h,
                "memory",
                &format!("{:.1} GiB", m.memory_kib as f64 / 1048576.0),
            );
            row(h, "kernel", &m.kernel);
            row(h, "OS", &m.os);
            row(h, "host", &m.hostname);
            for n in &m.nics {
                let v = format!(
                    "driver {}{}{}{}",
                    n.driver.as_deref().unwrap_or("unknown"),
                    n.driver_version
                        .as_deref()
                        .map(|v| format!(" {v}"))
                        .unwrap_or_default(),
                    n.mtu.map(|m| format!(", MTU {m}")).unwrap_or_default(),
                    n.netns
                        .as_deref()
                        .map(|ns| format!(", netns {ns}"))
                        .unwrap_or_default(),
                );
                row(h, &format!("interface {}", esc(&n.name)), &v);
            }
            let _ = writeln!(h, "</dl>");
        }
        (None, Some(v)) if !v.is_null() => {
            let _ = writeln!(
                h,
                "<pre>{}</pre>",
                esc(&serde_json::to_string_pretty(v).unwrap_or_default())
            );
        }
        _ => {
            let _ = writeln!(h, "<p>Not recorded (meta.json has no machine).</p>");
        }
    }
    match &meta.tools {
        Some(t) if !t.is_empty() => {
            let _ = writeln!(
                h,
                "<table><tr><th class=\"l\">tool</th><th class=\"l\">version</th></tr>"
            );
            for (k, v) in t {
                let _ = writeln!(
                    h,
                    "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
                    esc(k),
                    esc(v)
                );
            }
            let _ = writeln!(h, "</table>");
        }
        _ => {
            let _ = writeln!(h, "<p>Tool versions not recorded.</p>");
        }
    }
}

/// A capture rate (0..1) as percent: "99.87 %".
pub fn pct01(v: f64) -> String {
    format!("{:.2} %", v * 100.0)
}

/// A percentage (0..100): "47.3 %".
pub fn pct100(v: f64) -> String {
    format!("{v:.1} %")
}

/// Mbit/s with the right prefix: "412 Mb/s", "1.23 Gb/s".
pub fn mbit(v: f64) -> String {
    units::si(v * 1e6, "b/s")
}

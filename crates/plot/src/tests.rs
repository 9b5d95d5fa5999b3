use super::*;

#[test]
fn from_reruns_is_eq_6_2_to_6_4() {
    // Seven reruns of one inter-packet gap: capture rates and data rates.
    let rate = [91.0, 95.0, 99.0, 97.0, 93.0, 96.0, 94.0];
    let mbit = [500.0, 510.0, 490.0, 505.0, 495.0, 500.0, 500.0];
    let p = ErrorPoint::from_reruns(&mbit, &rate).unwrap();
    assert_eq!((p.y_min, p.y_max), (91.0, 99.0));
    assert_eq!(p.y, 665.0 / 7.0);
    assert_eq!((p.x_min, p.x, p.x_max), (490.0, 500.0, 510.0));
    assert!(ErrorPoint::from_reruns(&[], &[]).is_none());
}

#[test]
fn ticks_are_short() {
    assert_eq!(tick(20.0), "20");
    assert_eq!(tick(-3.0), "-3");
    assert_eq!(tick(0.25), "0.25");
    assert_eq!(tick(1.0 / 3.0), "0.333");
    assert_eq!(tick(12.5), "12.5");
    assert_eq!(tick(5000.0), "5000");
    // Rates and counts: an SI prefix, not 100000.
    assert_eq!(tick(100000.0), "100 k");
    assert_eq!(tick(550000.0), "550 k");
    assert_eq!(tick(1.5e6), "1.5 M");
    assert_eq!(tick(-20000.0), "-20 k");
    // Below 0.01 three decimals would print 0: a power of ten instead.
    assert_eq!(tick(0.001), "1e-3");
    assert_eq!(tick(0.00025), "2.5e-4");
    assert_eq!(tick(-0.004), "-4e-3");
    let mut names = Axis::new("filter");
    names.names = vec!["none".into(), "udp".into()];
    assert_eq!(names.tick_label(2.0), "udp");
    assert_eq!(names.tick_label(1.5), "");
    assert_eq!(names.tick_label(3.0), "");
}

#[test]
fn pad_bounds_and_fit() {
    // 5 % of the span either side: 10..30 → 9..31.
    assert_eq!(pad(10.0, 30.0), 9.0..31.0);
    // A flat range gets ±1.
    assert_eq!(pad(5.0, 5.0), 4.0..6.0);
    assert_eq!(bounds([3.0, -1.0, 7.5, 2.0]), (-1.0, 7.5));
    assert_eq!(bounds([]), (f64::INFINITY, f64::NEG_INFINITY));

    let mut a = Axis::new("buffer (KiB)");
    assert_eq!(a.fit(0.0, 100.0), -5.0..105.0);
    a.log = true;
    assert_eq!(a.fit(13.0, 100.0), 10.0..130.0);
    a.range = Some(1.0..2.0);
    assert_eq!(a.fit(13.0, 100.0), 1.0..2.0);
    // Categories 1..3 with half a step either side, whatever the range.
    a.names = vec!["a".into(), "b".into(), "c".into()];
    assert_eq!(a.fit(13.0, 100.0), 0.5..3.5);
}

#[test]
fn histogram_time_series_and_cdf_ranges() {
    let src = [0.0, 0.5, 0.0, 0.25, 0.25];
    let model = [0.0, 0.4, 0.1, 0.5];
    let h = Chart::histogram("h", "size", "share", &[("source", &src), ("model", &model)]);
    assert_eq!(h.series[0].points.len(), 3);
    assert_eq!(h.series[1].points.len(), 3);
    // Last bin 4: 4 + ⌊4/40⌋ + 2; y from half the smallest share (0.1).
    assert_eq!(h.x.range, Some(0.0..6.0));
    assert_eq!(h.y.range, Some(0.05..1.0));
    assert!(h.y.log);

    let t = Chart::time_series(
        "t",
        "packets/s",
        &[60_000_000_000, 120_000_000_000],
        60_000_000_000,
        &[("avg", vec![5.0, 10.0])],
    );
    let xs: Vec<f64> = t.series[0].points.iter().map(|q| q.x).collect();
    assert_eq!(xs, [0.0, 1.0]);
    assert_eq!(t.x.range, Some(0.0..2.0));
    assert_eq!(t.y.range, Some(0.0..11.0));
    // One minute (a short trace): a marker, not a line through one point, which draws nothing.
    let one = Chart::time_series(
        "t",
        "packets/s",
        &[60_000_000_000],
        60_000_000_000,
        &[("avg", vec![5.0])],
    );
    let empty = Chart {
        series: vec![],
        ..one.clone()
    };
    let markers = |c: &Chart| count(&chart_svg(c).unwrap(), "circle");
    assert!(markers(&one) > markers(&empty), "one minute draws nothing");
    // The document says so: a report test can fail on any plot without data.
    assert_eq!(drawn_data_marks(&chart_svg(&one).unwrap()), Some(1));
    assert_eq!(drawn_data_marks(&chart_svg(&empty).unwrap()), Some(0));
    let one_line = Chart {
        series: vec![Series::line("l", [(0.0, 1.0)])],
        ..empty.clone()
    };
    assert_eq!(drawn_data_marks(&chart_svg(&one_line).unwrap()), Some(0));
    assert_eq!(drawn_data_marks("<svg></svg>"), None);
    // 100 ms bins (a short trace): x in seconds, the range one bin past the last start.
    let short = Chart::time_series(
        "t",
        "packets/s",
        &[5_000_000_000, 5_100_000_000, 5_200_000_000],
        100_000_000,
        &[("avg", vec![1.0, 2.0, 3.0])],
    );
    let xs: Vec<f64> = short.series[0].points.iter().map(|q| q.x).collect();
    assert_eq!(xs, [0.0, 0.1, 0.2]);
    assert_eq!(short.x.label, "seconds");
    let r = short.x.range.clone().unwrap();
    assert!(r.start == 0.0 && (r.end - 0.3).abs() < 1e-9, "{r:?}");

    assert_eq!(
        cdf_steps(&[0.0, 0.5, 0.0, 0.5], 6.0),
        [(1.0, 0.0), (1.0, 0.5), (3.0, 0.5), (3.0, 1.0), (6.0, 1.0)]
    );
}

/// How often an element occurs in an SVG document.
fn count(svg: &str, element: &str) -> usize {
    svg.matches(&format!("<{element} ")).count()
}

/// What the frame, the grid and the axes draw, with no series: subtracted from the counts below.
fn baseline(c: &Chart) -> String {
    let mut empty = c.clone();
    let points = || c.series.iter().flat_map(|s| &s.points);
    let (x_lo, x_hi) = bounds(points().flat_map(|q| [q.x_min, q.x_max]));
    let (y_lo, y_hi) = bounds(points().flat_map(|q| [q.y_min, q.y_max]));
    empty.x.range = Some(c.x.fit(x_lo, x_hi));
    empty.y.range = Some(c.y.fit(y_lo, y_hi));
    for s in &mut empty.series {
        s.points.clear();
        s.name.clear();
    }
    empty.lines.clear();
    chart_svg(&empty).unwrap()
}

fn sample_plot() -> Chart {
    let mk = |base: f64, drop: f64| -> Vec<ErrorPoint> {
        [100.0, 300.0, 500.0, 700.0, 900.0]
            .iter()
            .map(|&x| {
                let y = (base - drop * x / 900.0).max(0.0);
                ErrorPoint {
                    x,
                    y,
                    y_min: (y - 3.0).max(0.0),
                    y_max: (y + 2.0).min(100.0),
                    x_min: x - 10.0,
                    x_max: x + 10.0,
                }
            })
            .collect()
    };
    let mut p = Chart::new(
        "Capture rate vs. data rate (single CPU)",
        "data rate (Mbit/s)",
        "capture rate (% of generated packets)",
    )
    .series("ringcap ring", mk(100.0, 5.0))
    .series("ringcap copy", mk(100.0, 30.0))
    .series("tcpdump", mk(100.0, 45.0))
    .series("netsniff-ng", mk(99.0, 15.0))
    .series("tcpdump | gzip -1", mk(95.0, 80.0));
    p.y.range = Some(0.0..105.0);
    p
}

#[test]
fn line_plot_has_title_labels_legend_and_bars() {
    let p = sample_plot();
    let svg = chart_svg(&p).unwrap();
    assert!(svg.starts_with("<svg"));
    for text in [
        "Capture rate vs. data rate (single CPU)",
        "data rate (Mbit/s)",
        "capture rate (% of generated packets)",
        "ringcap ring",
        "netsniff-ng",
        "tcpdump | gzip -1",
    ] {
        let escaped = text.replace('&', "&amp;");
        assert!(svg.contains(&escaped), "missing `{text}`");
    }
    let base = baseline(&p);
    // 5 series: a line each and a line in the legend column.
    assert_eq!(count(&svg, "polyline") - count(&base, "polyline"), 5 + 5);
    // Markers, 5 points + 1 in the legend per series: series 0 and 4 circles, 1 triangles, 2 squares,
    // 3 crosses (2 lines each). 25 vertical and 25 horizontal error bars: 3 lines each (bar and two
    // whiskers) and a ring at the average.
    assert_eq!(count(&svg, "circle"), 2 * (5 + 1) + 50);
    assert_eq!(count(&svg, "polygon"), 5 + 1);
    assert_eq!(count(&svg, "rect") - count(&base, "rect"), 5 + 1);
    assert_eq!(
        count(&svg, "line") - count(&base, "line"),
        2 * (5 + 1) + 50 * 3
    );
    if let Some(dir) = std::env::var_os("RINGCAP_PLOT_OUT") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::write(dir.join("line.svg"), &svg).unwrap();
        let mut log = sample_plot();
        log.title = "Capture rate vs. buffer size".into();
        log.x.label = "buffer size (KiB)".into();
        log.x.log = true;
        for s in &mut log.series {
            for (i, q) in s.points.iter_mut().enumerate() {
                let x = 64.0 * 4f64.powi(i as i32);
                *q = ErrorPoint {
                    x,
                    x_min: x,
                    x_max: x,
                    ..*q
                };
            }
        }
        std::fs::write(dir.join("log.svg"), chart_svg(&log).unwrap()).unwrap();
    }
}

#[test]
fn log_axis_and_bad_points_are_handled() {
    let mut p = sample_plot();
    p.x.log = true;
    assert!(chart_svg(&p).is_ok());
    p.x.range = Some(0.0..1000.0);
    assert!(matches!(chart_svg(&p), Err(PlotError::LogOfNonPositive(_))));
    let p = Chart::new("empty", "x", "y");
    assert_eq!(
        chart_svg(&p).unwrap_err().to_string(),
        "plot `empty` has no points to draw"
    );
    let p = Chart::new("nan", "x", "y").series("a", vec![ErrorPoint::new(1.0, f64::NAN)]);
    assert!(matches!(chart_svg(&p), Err(PlotError::NotFinite { .. })));
}

#[test]
fn scatter_draws_points_and_reference_lines() {
    let mut p = Chart::scatter(
        "Residuals vs. predicted",
        "predicted response",
        "residual",
        vec![(1.0, 0.5), (2.0, -0.5), (3.0, 0.1)],
    )
    .line(RefLine {
        from: (1.0, 0.0),
        to: (3.0, 0.0),
        label: "zero".into(),
    });
    p.size = (600, 450);
    let svg = chart_svg(&p).unwrap();
    assert_eq!(count(&svg, "circle"), 3);
    assert!(svg.contains("Residuals vs. predicted") && svg.contains("zero"));
    // The dashed line is dashes (polylines) and the legend box shows it as one more.
    let dashes = count(&svg, "polyline") - count(&baseline(&p), "polyline");
    assert!(dashes > 3, "{dashes}");
}

#[test]
fn histogram_draws_a_marker_per_non_empty_bin() {
    let src = [0.0, 0.5, 0.0, 0.25, 0.25];
    let model = [0.0, 0.4, 0.1, 0.3, 0.1, 0.1];
    let h = Chart::histogram(
        "sizes",
        "size",
        "share",
        &[("source", &src), ("model", &model)],
    );
    let svg = chart_svg(&h).unwrap();
    // Source: circles, model: triangles; one more of each in the legend column.
    assert_eq!(count(&svg, "circle"), 3 + 1);
    assert_eq!(count(&svg, "polygon"), 5 + 1);
}

#[test]
fn stacked_time_series_draw_a_line_per_series() {
    let t = [0, 60_000_000_000, 120_000_000_000];
    let pps = Chart::time_series(
        "(a) packets per second",
        "packets/s",
        &t,
        60_000_000_000,
        &[("max", vec![3.0, 5.0, 4.0]), ("min", vec![1.0, 2.0, 1.0])],
    );
    let mbps = Chart::time_series(
        "(b) megabits per second",
        "Mb/s",
        &t,
        60_000_000_000,
        &[("", vec![1.0, 2.0, 1.5])],
    );
    let svg = stack_svg(Some("a day"), &[pps.clone(), mbps.clone()]).unwrap();
    let base = stack_svg(
        Some("a day"),
        &[
            Chart {
                series: vec![],
                ..pps
            },
            Chart {
                series: vec![],
                ..mbps
            },
        ],
    )
    .unwrap();
    // Three lines and two legend entries (the unnamed line has none).
    assert_eq!(count(&svg, "polyline") - count(&base, "polyline"), 3 + 2);
    assert!(svg.contains("a day") && svg.contains("(b) megabits per second"));
    assert!(
        svg.contains(r#"height="740""#),
        "350 + 350 + 40 pixels high"
    );
}

#[test]
fn html_escapes_and_wraps() {
    assert_eq!(
        html::esc(r#"a <b> & "c""#),
        "a &lt;b&gt; &amp; &quot;c&quot;"
    );
    let page = html::page("x & y", "p{}", "<p>hi</p>");
    assert!(page.starts_with("<!DOCTYPE html>\n"));
    assert!(page.contains("<title>x &amp; y</title>") && page.contains("<style>p{}</style>"));
    assert!(page.ends_with("<p>hi</p></body></html>\n"));
    let f = html::svg_figure("a\"b", "<?xml version=\"1.0\"?>\n<svg></svg>", "cap");
    assert_eq!(
        f,
        "<figure id=\"a&quot;b\"><svg></svg><figcaption>cap</figcaption></figure>\n"
    );
}

/// PNG for reports: needs rsvg-convert (apt-get install librsvg2-bin); without it the error says so.
#[test]
fn svg_to_png_converts_or_says_what_to_install() {
    let dir = std::env::temp_dir().join(format!("plot-png-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("p.svg");
    let png = dir.join("p.png");
    write_svg(&svg, &chart_svg(&sample_plot()).unwrap()).unwrap();
    match svg_to_png(&svg, &png) {
        Ok(()) => {
            let bytes = std::fs::read(&png).unwrap();
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
            // IHDR width and height: the plot's size in pixels.
            assert_eq!(u32::from_be_bytes(bytes[16..20].try_into().unwrap()), 900);
            assert_eq!(u32::from_be_bytes(bytes[20..24].try_into().unwrap()), 560);
        }
        Err(e) => assert!(
            e.to_string().contains("apt-get install librsvg2-bin"),
            "{e}"
        ),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A demand line (seed 000 Fig 6.13): drawn across the plot, labelled on the plot and in the legend, and
/// the y axis reaches it even when every point is far below.
#[test]
fn horizontal_line_spans_the_plot_and_is_labelled() {
    let speeds = vec![ErrorPoint::new(1.0, 10.0), ErrorPoint::new(2.0, 12.0)];
    let bare = Chart::new("disk", "block (KiB)", "MB/s").series("write", speeds.clone());
    let with_line = bare.clone().hline(125.0, "line rate: 125 MB/s");
    let svg = chart_svg(&with_line).unwrap();
    let base = chart_svg(&bare).unwrap();
    if let Some(dir) = std::env::var_os("RINGCAP_PLOT_OUT") {
        std::fs::write(std::path::Path::new(&dir).join("hline.svg"), &svg).unwrap();
    }
    // The label twice (on the plot and in the legend column); the legend sample and the dashes are lines.
    assert_eq!(svg.matches("line rate: 125 MB/s").count(), 2);
    assert!(count(&svg, "polyline") > count(&base, "polyline") + 1);
    // Points top out at 12: only the line makes the axis reach 120.
    let ticks = |s: &str| -> Vec<String> {
        s.split("<text ")
            .skip(1)
            .filter_map(|t| Some(t.split_once('>')?.1.split('<').next()?.trim().to_string()))
            .collect()
    };
    assert!(
        !ticks(&base).contains(&"120".to_string()),
        "{:?}",
        ticks(&base)
    );
    assert!(
        ticks(&svg).contains(&"120".to_string()),
        "{:?}",
        ticks(&svg)
    );
    // The dashes cover the x range drawn: from the left end to the right end of the plot.
    let xs: Vec<f64> = dashed_x_extent(&svg, &base);
    let (lo, hi) = (xs[0], xs[1]);
    assert!(
        hi - lo > 500.0,
        "dashes span {lo}..{hi} px of a 900 px chart"
    );
    let not_finite = bare.hline(f64::NAN, "broken");
    assert!(matches!(
        chart_svg(&not_finite),
        Err(PlotError::NotFinite { .. })
    ));
}

/// Leftmost and rightmost x of the polylines in `svg` that `base` does not have.
fn dashed_x_extent(svg: &str, base: &str) -> Vec<f64> {
    let lines = |s: &str| -> Vec<String> {
        s.split("<polyline ")
            .skip(1)
            .map(|p| p.split("/>").next().unwrap_or("").to_string())
            .collect()
    };
    let old = lines(base);
    let xs: Vec<f64> = lines(svg)
        .into_iter()
        .filter(|l| !old.contains(l))
        .filter_map(|l| {
            let pts = l.split("points=\"").nth(1)?.split('"').next()?.to_string();
            Some(pts)
        })
        .flat_map(|pts| {
            pts.split_whitespace()
                .filter_map(|xy| xy.split(',').next()?.parse::<f64>().ok())
                .collect::<Vec<_>>()
        })
        .collect();
    vec![
        xs.iter().copied().fold(f64::MAX, f64::min),
        xs.iter().copied().fold(f64::MIN, f64::max),
    ]
}

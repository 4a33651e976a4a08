//! The console's decision charts: per-second rates over the last 15 minutes as small inline SVG
//! bar charts (no script, allowed by the page's CSP as inline markup), one per kind of answer,
//! each with its total and peak in words so the figures are readable without the picture.

use std::fmt::Write;

use crate::insight::rates::{BUCKET_SECS, Point, Totals};

const WIDTH: usize = 360;
/// A chart: its name, its bar colour and what it counts.
type Kind = (&'static str, &'static str, fn(&Totals) -> u64);
const HEIGHT: usize = 48;

/// The four charts, or a note that stats are off.
pub(super) fn render(out: &mut String, series: Option<&[Point]>) {
    out.push_str("<h2 id=\"rates\">Decisions per second, last 15 minutes</h2>\n");
    let Some(series) = series else {
        let _ = writeln!(
            out,
            "<p class=\"none\">not counted: {}</p>",
            super::html::escape(super::STATS_OFF)
        );
        return;
    };
    let kinds: [Kind; 4] = [
        ("allowed", "#2a7", |t| t.allowed),
        ("denied", "#c80", |t| t.denied),
        ("failure mode", "#b00", |t| t.degraded),
        ("errors", "#b00", |t| t.errors),
    ];
    out.push_str("<div class=\"charts\">");
    for (name, colour, read) in kinds {
        chart(out, series, name, colour, read);
    }
    out.push_str("</div>\n");
}

fn chart(out: &mut String, series: &[Point], name: &str, colour: &str, read: fn(&Totals) -> u64) {
    let counts: Vec<u64> = series.iter().map(|p| read(&p.counts)).collect();
    let total: u64 = counts.iter().sum();
    let peak = counts.iter().copied().max().unwrap_or(0);
    let per_sec = |n: u64| n as f64 / BUCKET_SECS as f64;
    let now = counts.last().copied().unwrap_or(0);
    let _ = write!(
        out,
        "<figure class=\"chart\" data-kind=\"{name}\" data-total=\"{total}\">\
         <svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"{name} per second\">\
         <rect width=\"{WIDTH}\" height=\"{HEIGHT}\" fill=\"#f6f6f6\"/>"
    );
    let bar = WIDTH as f64 / counts.len().max(1) as f64;
    for (i, &n) in counts.iter().enumerate().filter(|(_, n)| **n > 0) {
        // At least one pixel, so a single call in 15 minutes still shows.
        let h = ((n as f64 / peak as f64) * (HEIGHT - 2) as f64).max(1.0);
        let _ = write!(
            out,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{colour}\"/>",
            i as f64 * bar,
            HEIGHT as f64 - h,
            (bar - 0.5).max(0.5),
        );
    }
    let _ = write!(
        out,
        "</svg><figcaption><b>{name}</b>: {:.1}/s now, peak {:.1}/s, {total} in 15 min\
         </figcaption></figure>",
        per_sec(now),
        per_sec(peak),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratelimitd_core::clock::Timestamp;

    #[test]
    fn bars_scale_to_the_peak_and_captions_give_the_figures() {
        let mut series: Vec<Point> = (0..90u64)
            .map(|i| Point {
                start: Timestamp::from_secs(i * 10),
                counts: Totals::default(),
            })
            .collect();
        series[88].counts.allowed = 100;
        series[89].counts.allowed = 50;
        let mut out = String::new();
        render(&mut out, Some(&series));
        assert!(
            out.contains("data-kind=\"allowed\" data-total=\"150\""),
            "{out}"
        );
        assert!(out.contains("<b>allowed</b>: 5.0/s now, peak 10.0/s, 150 in 15 min"));
        assert!(
            out.contains("height=\"46.0\""),
            "the peak bar is full height"
        );
        assert!(
            out.contains("height=\"23.0\""),
            "half the peak is half as high"
        );
        assert!(out.contains("data-kind=\"errors\" data-total=\"0\""));
        let mut off = String::new();
        render(&mut off, None);
        assert!(off.contains(
            "not counted: the counters are off (DISABLE_STATS=true, or USE_STATSD=false"
        ));
    }
}

//! One flame graph for on-CPU and off-CPU time, with inferno. Blocked time
//! ends in one pseudo frame per subclass, each with its own colour and a
//! legend; frames are searchable as in any inferno graph.

use holdup_analysis::folded::leaf_name;
use holdup_trace::Class;
use inferno::flamegraph::color::{Color, MultiPalette, Palette, PaletteMap};
use inferno::flamegraph::{self, Options};
use std::io::{self, Write};

/// Colours of the subclasses (the legend shows them).
pub fn class_color(class: Class) -> Color {
    let (r, g, b) = match class {
        Class::Cpu => (235, 140, 60),
        Class::Io => (60, 110, 220),
        Class::Lock => (170, 70, 200),
        Class::Sched => (40, 170, 90),
        Class::Other => (140, 140, 140),
    };
    Color { r, g, b }
}

pub struct FlameOptions {
    pub title: String,
}

/// Render folded stacks (`holdup_analysis::folded`) as an SVG flame graph.
pub fn render(
    stacks: &[(String, u64)],
    opts: &FlameOptions,
    out: &mut impl Write,
) -> io::Result<()> {
    let mut palette = PaletteMap::default();
    for c in Class::ALL {
        if let Some(leaf) = leaf_name(c) {
            palette.insert(leaf, class_color(c));
        }
    }
    let mut o = Options::default();
    o.title = opts.title.clone();
    // The legend takes the subtitle's place; reserve the line for it.
    o.subtitle = Some(" ".into());
    o.count_name = "samples".into();
    // Java semantics colour `_[k]` kernel frames orange and `_[i]` inlined
    // frames aqua, user code in warm tones.
    o.colors = Palette::Multi(MultiPalette::Java);
    o.palette_map = Some(&mut palette);
    o.hash = true;
    o.deterministic = true;
    let lines: Vec<String> = stacks.iter().map(|(s, n)| format!("{s} {n}")).collect();
    let mut svg = Vec::new();
    flamegraph::from_lines(&mut o, lines.iter().map(String::as_str), &mut svg)?;
    out.write_all(&with_legend(&svg))
}

/// Add a legend of the subclass colours, centred under the title where a
/// subtitle would go.
fn with_legend(svg: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(svg);
    let Some(end) = text.rfind("</svg>") else {
        return svg.to_vec();
    };
    let entries = [
        (Class::Io, "[I] io wait"),
        (Class::Lock, "[L] lock wait"),
        (Class::Sched, "[S] runqueue"),
        (Class::Other, "[B] other blocked"),
    ];
    let mut legend =
        String::from("<g id=\"holdup-legend\" font-family=\"Verdana\" font-size=\"11\">");
    let width = text
        .split_once("width=\"")
        .and_then(|(_, rest)| rest.split('"').next())
        .and_then(|w| w.parse::<f64>().ok())
        .unwrap_or(1200.0);
    const STEP: f64 = 130.0;
    let mut x = (width - STEP * entries.len() as f64) / 2.0;
    for (class, label) in entries {
        let c = class_color(class);
        legend.push_str(&format!(
            "<rect x=\"{x:.0}\" y=\"36\" width=\"11\" height=\"11\" fill=\"rgb({},{},{})\"/><text x=\"{:.0}\" y=\"46\">{label}</text>",
            c.r,
            c.g,
            c.b,
            x + 16.0
        ));
        x += STEP;
    }
    legend.push_str("</g>\n");
    let mut out = String::with_capacity(text.len() + legend.len());
    out.push_str(&text[..end]);
    out.push_str(&legend);
    out.push_str(&text[end..]);
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_leaves_get_their_class_colour_and_a_legend() {
        let stacks = vec![
            ("app;main;compute".to_string(), 30),
            ("app;main;do_reads;pread;[I] io wait".to_string(), 70),
        ];
        let mut out = Vec::new();
        render(&stacks, &FlameOptions { title: "t".into() }, &mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        let io = class_color(Class::Io);
        assert!(svg.contains(&format!("rgb({},{},{})", io.r, io.g, io.b)));
        assert!(svg.contains("holdup-legend"));
        assert!(svg.contains("do_reads"));
        assert!(svg.contains("[I] io wait"));
    }
}

//! GraphViz's SVG, made safe to paste into the page.
//!
//! The picture comes back from an external program and carries names from
//! the trace (threads, devices, functions), which anyone whose process was
//! recorded chose. It is not pasted as it came: it is parsed and written
//! again with only the drawing elements and attributes GraphViz uses for
//! our graphs, every text and attribute value decoded and escaped anew.
//! Scripts, event handlers, links, styles, foreign objects and anything
//! else not on the lists are left out (an unknown element with all it
//! holds); text that is not well-formed is refused as a whole.

use super::escape;

/// Elements kept: GraphViz's shapes, groups, texts and tooltips.
const ELEMENTS: &[&str] = &[
    "svg", "g", "title", "text", "polygon", "polyline", "path", "ellipse", "circle", "rect", "line",
];

/// Attributes kept: geometry and presentation. Ids are left out (they
/// would share the page's name space), and so is anything that can name a
/// URL or run code (`href`, `style`, `on…`).
const ATTRIBUTES: &[&str] = &[
    "class",
    "width",
    "height",
    "viewBox",
    "transform",
    "fill",
    "fill-opacity",
    "stroke",
    "stroke-width",
    "stroke-dasharray",
    "stroke-opacity",
    "opacity",
    "points",
    "d",
    "cx",
    "cy",
    "rx",
    "ry",
    "r",
    "x",
    "y",
    "x1",
    "y1",
    "x2",
    "y2",
    "text-anchor",
    "font-family",
    "font-size",
    "font-weight",
    "font-style",
];

/// Text with XML's five named entities and numeric references resolved;
/// an unknown entity stays as written (and is escaped on output).
fn decode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let entity = rest
            .find(';')
            .filter(|&end| end <= 12)
            .and_then(|end| Some((resolve(&rest[1..end])?, end)));
        match entity {
            Some((c, end)) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn resolve(name: &str) -> Option<char> {
    match name {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        _ => {
            let num = name.strip_prefix('#')?;
            let code = match num.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => num.parse().ok()?,
            };
            char::from_u32(code).filter(|c| *c != '\0')
        }
    }
}

/// A presentation value that cannot reach outside the picture: no
/// `url(…)` references or other functions, except the transforms
/// GraphViz writes.
fn safe_value(name: &str, value: &str) -> bool {
    if name == "transform" {
        return value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || " .,-()".contains(c));
    }
    !value.contains(['(', ')', ':', '\\'])
}

/// One tag: `<name attr="v" …>` or `<name …/>`, the text after `<`.
struct Tag<'a> {
    name: &'a str,
    attrs: Vec<(&'a str, String)>,
    empty: bool,
}

/// Parse the inside of a start tag (between `<` and `>`).
fn parse_tag(inner: &str) -> Result<Tag<'_>, String> {
    let (inner, empty) = match inner.strip_suffix('/') {
        Some(i) => (i, true),
        None => (inner, false),
    };
    let name_end = inner
        .find(|c: char| c.is_ascii_whitespace())
        .unwrap_or(inner.len());
    let name = &inner[..name_end];
    let mut rest = inner[name_end..].trim_start();
    let mut attrs = Vec::new();
    while !rest.is_empty() {
        let eq = rest.find('=').ok_or("an attribute without a value")?;
        let key = rest[..eq].trim();
        let after = rest[eq + 1..].trim_start();
        let quote = after
            .chars()
            .next()
            .filter(|q| *q == '"' || *q == '\'')
            .ok_or("an attribute value without quotes")?;
        let close = after[1..]
            .find(quote)
            .ok_or("an attribute value without its closing quote")?;
        attrs.push((key, decode(&after[1..1 + close])));
        rest = after[close + 2..].trim_start();
    }
    let valid = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_:.".contains(c))
    };
    if !valid(name) || !attrs.iter().all(|(k, _)| valid(k)) {
        return Err(format!(
            "a malformed tag <{}>",
            name.chars().take(40).collect::<String>()
        ));
    }
    Ok(Tag { name, attrs, empty })
}

/// The `<svg>` element of GraphViz's output, rebuilt with only what
/// [`ELEMENTS`] and [`ATTRIBUTES`] allow; `Err` says why the text was not
/// a picture we can show.
pub fn clean(svg: &str) -> Result<String, String> {
    let mut out = String::with_capacity(svg.len());
    // Open elements: their names, and whether they are kept.
    let mut open: Vec<(&str, bool)> = Vec::new();
    let mut dropped = 0usize; // open elements that are left out, with all inside
    let mut seen_svg = false;
    let mut rest = svg;
    while !rest.is_empty() {
        let Some(lt) = rest.find('<') else {
            if !rest.trim().is_empty() && !open.is_empty() && dropped == 0 {
                out.push_str(&escape(&decode(rest)));
            }
            break;
        };
        if lt > 0 {
            let text = &rest[..lt];
            if !open.is_empty() && dropped == 0 {
                out.push_str(&escape(&decode(text)));
            }
        }
        rest = &rest[lt..];
        // Comments, processing instructions, declarations: not drawn.
        if let Some(body) = rest.strip_prefix("<!--") {
            let end = body.find("-->").ok_or("an unterminated comment")?;
            rest = &body[end + 3..];
            continue;
        }
        if let Some(body) = rest.strip_prefix("<?") {
            let end = body
                .find("?>")
                .ok_or("an unterminated processing instruction")?;
            rest = &body[end + 2..];
            continue;
        }
        if let Some(body) = rest.strip_prefix("<!") {
            let end = body.find('>').ok_or("an unterminated declaration")?;
            // An internal subset could define entities; GraphViz never
            // writes one.
            if body[..end].contains(['[', '<']) {
                return Err("a document type with declarations".into());
            }
            rest = &body[end + 1..];
            continue;
        }
        let close = rest.find('>').ok_or("an unterminated tag")?;
        let inner = &rest[1..close];
        rest = &rest[close + 1..];
        if let Some(name) = inner.strip_prefix('/') {
            let name = name.trim();
            match open.pop() {
                Some((n, kept)) if n == name => {
                    if !kept {
                        dropped -= 1;
                    } else if dropped == 0 {
                        out.push_str(&format!("</{name}>"));
                    }
                }
                _ => return Err(format!("</{name}> closes nothing open")),
            }
            if open.is_empty() {
                break; // the end of the <svg> element
            }
            continue;
        }
        let tag = parse_tag(inner)?;
        if open.is_empty() {
            if tag.name != "svg" || seen_svg {
                return Err(format!("<{}> where <svg> was expected", tag.name));
            }
            seen_svg = true;
        }
        let kept = ELEMENTS.contains(&tag.name) && dropped == 0;
        if kept {
            out.push('<');
            out.push_str(tag.name);
            for (k, v) in &tag.attrs {
                if ATTRIBUTES.contains(k) && safe_value(k, v) {
                    out.push_str(&format!(" {k}=\"{}\"", escape(v)));
                }
            }
            out.push_str(if tag.empty { "/>" } else { ">" });
        }
        if !tag.empty {
            open.push((tag.name, kept));
            if !kept {
                dropped += 1;
            }
        }
    }
    if !seen_svg {
        return Err("no <svg> element".into());
    }
    if !open.is_empty() {
        return Err("an <svg> element that does not end".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRAPHVIZ: &str = r##"<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN"
 "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">
<!-- Generated by graphviz version 2.43.0 (0)
 -->
<svg width="130pt" height="209pt"
 viewBox="0.00 0.00 130.00 209.00" xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">
<g id="graph0" class="graph" transform="scale(1 1) rotate(0) translate(4 205)">
<title>w</title>
<!-- a&lt;script&gt; -->
<g id="node1" class="node">
<title>a&lt;script&gt;</title>
<polygon fill="lightgrey" stroke="black" points="106,-162 20,-162 16,-158"/>
<text text-anchor="middle" x="61" y="-140.3" font-family="Times,serif" font-size="14.00">a&lt;script&gt; &amp; &#45;&gt;&#x41;</text>
</g>
<path fill="none" stroke="black" stroke-width="2.5" stroke-dasharray="5,2" d="M61,-125.8C61,-114.16"/>
</g>
</svg>
"##;

    #[test]
    fn graphviz_pictures_keep_their_drawing_and_escaped_names() {
        let got = clean(GRAPHVIZ).unwrap();
        assert!(
            got.starts_with(
                "<svg width=\"130pt\" height=\"209pt\" viewBox=\"0.00 0.00 130.00 209.00\">"
            ),
            "{got}"
        );
        assert!(got.ends_with("</svg>"), "{got}");
        assert!(
            got.contains("<g class=\"graph\" transform=\"scale(1 1) rotate(0) translate(4 205)\">")
        );
        assert!(got.contains(
            "<polygon fill=\"lightgrey\" stroke=\"black\" points=\"106,-162 20,-162 16,-158\"/>"
        ));
        assert!(
            got.contains(">a&lt;script&gt; &amp; -&gt;A</text>"),
            "{got}"
        );
        assert!(got.contains("<title>a&lt;script&gt;</title>"));
        assert!(got.contains("stroke-dasharray=\"5,2\" d=\"M61,-125.8C61,-114.16\"/>"));
        for gone in ["<?xml", "DOCTYPE", "<!--", "id=", "xmlns", "http"] {
            assert!(!got.contains(gone), "{gone} in {got}");
        }
    }

    #[test]
    fn scripts_handlers_links_and_foreign_content_are_left_out() {
        let hostile = r##"<svg onload="alert(1)" width="1"><script>alert(2)</script>
<g style="background:url(http://x/)" class="node"><a href="javascript:alert(3)"><text>link</text></a>
<foreignObject><img src="x" onerror="alert(4)"/><p>html</p></foreignObject>
<text x="1" fill="url(http://evil/#p)" y="2">&lt;img src=x onerror=alert(5)&gt;</text>
<set attributeName="onmouseover" to="alert(6)"/><animate href="#x"/></g></svg>"##;
        let got = clean(hostile).unwrap();
        assert_eq!(
            got,
            "<svg width=\"1\">\n<g class=\"node\">\n\n<text x=\"1\" y=\"2\">&lt;img src=x onerror=alert(5)&gt;</text>\n</g></svg>"
        );
    }

    #[test]
    fn malformed_text_is_refused_whole() {
        for bad in [
            "",
            "no picture",
            "<html><svg></svg></html>",
            "<svg><g></svg>",
            "<svg><g>",
            "<svg x=1></svg>",
            "<svg x=\"1></svg>",
            "<!DOCTYPE svg [<!ENTITY e \"x\">]><svg>&e;</svg>",
            "<svg><g onclick></g></svg>",
            "<svg><<script>></svg>",
        ] {
            assert!(clean(bad).is_err(), "{bad:?} gave {:?}", clean(bad));
        }
        // What follows the picture is not part of it.
        assert_eq!(
            clean("<svg></svg><script>alert(1)</script>").unwrap(),
            "<svg></svg>"
        );
    }
}

//! What the HTML reports share: escaping, the page around a body, a figure with an inline SVG.

/// HTML-escape text (also for attribute values in double quotes).
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            _ => o.push(c),
        }
    }
    o
}

/// A whole self-contained page: the (escaped) title, a style sheet and the body (HTML).
pub fn page(title: &str, css: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>{css}</style></head><body>\n\
         {body}</body></html>\n",
        esc(title)
    )
}

/// A `<figure>` with the SVG document inline (without its XML prolog, if any), so the page stays one
/// file, and a caption (HTML).
pub fn svg_figure(id: &str, svg: &str, caption: &str) -> String {
    let svg = svg.find("<svg").map_or(svg, |i| &svg[i..]);
    format!(
        "<figure id=\"{}\">{svg}<figcaption>{caption}</figcaption></figure>\n",
        esc(id)
    )
}

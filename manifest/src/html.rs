//! The one HTML escaper of the workspace: the report's call-graph picture (`codegen`) and the
//! coverage charts (`maintain`) both write names from the kernel into SVG/HTML text and
//! attribute values. Here because it is the lowest crate both depend on.

/// `s` as HTML text or a double-quoted attribute value: `&`, `<`, `>` and `"` escaped.
pub fn escape_html(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::escape_html;

    #[test]
    fn escapes_what_html_reads() {
        assert_eq!(
            escape_html("a<b> & \"c\" 'd'"),
            "a&lt;b&gt; &amp; &quot;c&quot; 'd'"
        );
        // `&` first: an escape is never escaped twice
        assert_eq!(escape_html("&lt;"), "&amp;lt;");
    }
}

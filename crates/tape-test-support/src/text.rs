//! Reading the text a test captured (a program's stderr, a rustdoc
//! page).

/// `text` up to the first of `markers` found in it (all of it when none
/// is).
pub fn before_first<'t>(text: &'t str, markers: &[&str]) -> &'t str {
    let end = markers
        .iter()
        .filter_map(|m| text.find(m))
        .min()
        .unwrap_or(text.len());
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::before_first;

    #[test]
    fn text_is_cut_at_the_first_marker_found() {
        // (text, markers, what is left)
        let cases = [
            ("a|b#c", &["#", "|"][..], "a"),
            ("a#b|c", &["|", "#"][..], "a"),
            ("abc", &["#"][..], "abc"),
            ("", &["#"][..], ""),
        ];
        for (text, markers, want) in cases {
            assert_eq!(before_first(text, markers), want, "{text:?} {markers:?}");
        }
    }
}

//! Text normalisation: one spelling for line breaks, quotes, dashes and spaces.

/// Normalises a request: LF line breaks, straight quotes, `-` for dashes, single spaces,
/// indentation kept (a tab counts as four spaces), no trailing spaces, at most one blank
/// line in a row and none at either end.
pub(crate) fn normalize(text: &str) -> String {
    let mapped = map_chars(text);
    let mut out = String::with_capacity(mapped.len());
    let mut blank = false;
    for line in mapped.split('\n') {
        let body = line.trim_start_matches([' ', '\t']);
        let indent: usize = line[..line.len() - body.len()].bytes().map(|b| if b == b'\t' { 4 } else { 1 }).sum();
        if body.is_empty() {
            blank = !out.is_empty();
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
            if blank {
                out.push('\n');
            }
        }
        blank = false;
        out.extend(std::iter::repeat_n(' ', indent));
        let mut space = false;
        for c in body.chars() {
            if c == ' ' || c == '\t' {
                space = true;
            } else {
                if space {
                    out.push(' ');
                    space = false;
                }
                out.push(c);
            }
        }
    }
    out
}

/// Maps characters one by one: line breaks to `\n`, typographic punctuation to ASCII,
/// unicode spaces and control characters to spaces, zero-width characters to nothing.
fn map_chars(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                chars.next_if_eq(&'\n');
                out.push('\n');
            }
            '\n' | '\u{0085}' | '\u{2028}' | '\u{2029}' => out.push('\n'),
            '\t' => out.push('\t'),
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' | '\u{00B4}' => out.push('\''),
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' | '\u{00AB}' | '\u{00BB}' => out.push('"'),
            '\u{2010}'..='\u{2015}' | '\u{2212}' | '\u{FE58}' | '\u{FE63}' | '\u{FF0D}' => out.push('-'),
            '\u{2026}' => out.push_str("..."),
            '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}' | '\u{00AD}' => {}
            '\u{00A0}' | '\u{1680}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => out.push(' '),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn spelling_is_normalised_and_layout_kept() {
        assert_eq!(
            normalize("\u{feff}  \r\n“Fetch”\u{a0}\u{a0}it — now…\r\n\r\n\r\n\t- it’s\tdone  \r"),
            "\"Fetch\" it - now...\n\n    - it's done"
        );
    }
}

//! Telling, byte by byte, whether a JSON text is inside a string: what scanners that look for
//! brackets and commas in a model's answer need without parsing it. Quotes, backslashes,
//! brackets and commas are ASCII, so a byte-wise scan is safe in UTF-8.

/// Follows the strings of a JSON text one byte at a time.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct JsonStrings {
    in_string: bool,
    escaped: bool,
}

impl JsonStrings {
    /// Takes the next byte; true when it stands outside every string (the quotes that open and
    /// close a string count as inside it).
    pub(crate) fn outside(&mut self, byte: u8) -> bool {
        if self.in_string {
            match byte {
                _ if self.escaped => self.escaped = false,
                b'\\' => self.escaped = true,
                b'"' => self.in_string = false,
                _ => {}
            }
            false
        } else if byte == b'"' {
            self.in_string = true;
            false
        } else {
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::JsonStrings;

    #[test]
    fn brackets_and_escaped_quotes_inside_strings_are_inside() {
        let text = r#"{"a": "x}\"]", "b": [1]}"#;
        let mut strings = JsonStrings::default();
        let outside: String =
            text.bytes().filter(|&b| strings.outside(b)).map(char::from).filter(|c| !c.is_whitespace()).collect();
        assert_eq!(outside, "{:,:[1]}");
    }
}

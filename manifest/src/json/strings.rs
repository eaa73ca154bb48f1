//! Reading a JSON string: borrowed when it has no escapes, and refused when it holds a
//! character YAML would not take.

use std::borrow::Cow;

use super::{NotJson, Reader};

impl<'a> Reader<'a> {
    /// A string's text, borrowed from the document when it has no escapes.
    pub(super) fn string(&mut self) -> Result<Cow<'a, str>, NotJson> {
        self.pos += 1;
        let start = self.pos;
        while let Some(b) = self.peek() {
            if b == b'"' || b == b'\\' || b < 0x20 || self.unprintable(b) {
                break;
            }
            self.pos += 1;
        }
        if self.peek() == Some(b'"') {
            self.pos += 1;
            return Ok(Cow::Borrowed(&self.text[start..self.pos - 1]));
        }
        self.pos = start;
        let mut out = String::new();
        loop {
            let run_start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 || self.unprintable(b) {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.text[run_start..self.pos]);
            match self.peek().ok_or(NotJson)? {
                b'"' => {
                    self.pos += 1;
                    return Ok(Cow::Owned(out));
                }
                b'\\' => {
                    self.pos += 1;
                    let escaped = self.peek().ok_or(NotJson)?;
                    self.pos += 1;
                    match escaped {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode_escape()?),
                        _ => return Err(NotJson),
                    }
                }
                _ => return Err(NotJson),
            }
        }
    }

    /// Whether the character starting with byte `b` is one YAML refuses in a document (DEL,
    /// the C1 controls but NEL, U+FFFE and U+FFFF) though JSON allows it; the YAML reader
    /// reports those, so both readers agree.
    fn unprintable(&self, b: u8) -> bool {
        match b {
            0x7F => true,
            0xC2 => {
                matches!(self.bytes.get(self.pos + 1), Some(&next) if (0x80..=0x9F).contains(&next) && next != 0x85)
            }
            0xEF => matches!(self.bytes.get(self.pos + 1..self.pos + 3), Some([0xBF, 0xBE | 0xBF])),
            _ => false,
        }
    }

    fn hex4(&mut self) -> Result<u32, NotJson> {
        let hex = self.text.get(self.pos..self.pos + 4).ok_or(NotJson)?;
        // `from_str_radix` alone would also take a sign (`\u+123`), which JSON does not.
        if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(NotJson);
        }
        let code = u32::from_str_radix(hex, 16).map_err(|_| NotJson)?;
        self.pos += 4;
        Ok(code)
    }

    fn unicode_escape(&mut self) -> Result<char, NotJson> {
        let high = self.hex4()?;
        if (0xD800..0xDC00).contains(&high) {
            if !self.bytes[self.pos..].starts_with(b"\\u") {
                return Err(NotJson);
            }
            self.pos += 2;
            let low = self.hex4()?;
            if !(0xDC00..0xE000).contains(&low) {
                return Err(NotJson);
            }
            char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)).ok_or(NotJson)
        } else {
            char::from_u32(high).ok_or(NotJson)
        }
    }
}

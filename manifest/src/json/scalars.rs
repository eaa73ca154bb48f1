//! Reading a JSON text's tokens but strings: whitespace, keys, scalars, literals and numbers.

use super::{NotJson, Reader};
use crate::source::Span;
use crate::tree::{Node, Value};

impl Reader<'_> {
    pub(super) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    pub(super) fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.pos += 1;
        }
    }

    /// Reads `"key"` and the `:` after it.
    pub(super) fn key(&mut self) -> Result<Node, NotJson> {
        self.skip_ws();
        if self.peek() != Some(b'"') {
            return Err(NotJson);
        }
        let key = self.scalar()?;
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(NotJson);
        }
        self.pos += 1;
        self.skip_ws();
        Ok(key)
    }

    pub(super) fn scalar(&mut self) -> Result<Node, NotJson> {
        let start = self.pos;
        let value = match self.peek().ok_or(NotJson)? {
            b'"' => Value::Str(self.string()?.into()),
            b't' => self.word("true", Value::Bool(true))?,
            b'f' => self.word("false", Value::Bool(false))?,
            b'n' => self.word("null", Value::Null)?,
            b'-' | b'0'..=b'9' => self.number()?,
            _ => return Err(NotJson),
        };
        Ok(Node::new(value, Span::new(start, self.pos - start)))
    }

    fn word(&mut self, word: &str, value: Value) -> Result<Value, NotJson> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(NotJson)
        }
    }

    fn number(&mut self) -> Result<Value, NotJson> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        // JSON forbids leading zeros; YAML would read them differently, so leave those to it.
        let int_start = self.pos;
        let int_digits = self.digits();
        if int_digits == 0 || (int_digits > 1 && self.bytes[int_start] == b'0') {
            return Err(NotJson);
        }
        let mut float = false;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(NotJson);
            }
            float = true;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(NotJson);
            }
            float = true;
        }
        let token = &self.text[start..self.pos];
        if !float && let Ok(int) = token.parse::<i64>() {
            return Ok(Value::Int(int));
        }
        let number: f64 = token.parse().map_err(|_| NotJson)?;
        if !number.is_finite() {
            return Err(NotJson);
        }
        Ok(Value::Float(number))
    }

    /// Skips a run of ASCII digits and says how many there were.
    fn digits(&mut self) -> usize {
        let start = self.pos;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
        self.pos - start
    }
}

//! [`Text`]: a string kept in place when short, for the ids, agent names and dependencies a
//! large plan holds by the hundred thousand.

use std::borrow::{Borrow, Cow};
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

use serde::de::{self, Deserialize, Deserializer, Visitor};
use serde::{Serialize, Serializer};

/// A string of up to [`Text::INLINE`] bytes kept in place, a longer one on the heap: a task
/// id, an agent's name or a dependency costs no allocation of its own. It reads as a `str`,
/// and compares, orders and hashes as its bytes.
#[derive(Clone)]
pub struct Text(Repr);

#[derive(Clone)]
enum Repr {
    /// A text of at most [`Text::INLINE`] bytes: how many of `bytes` hold it, then zeros.
    Inline { len: u8, bytes: [u8; Text::INLINE] },
    /// A longer text.
    Heap(Box<str>),
}

// A dependency is a located text: 24 bytes here, plus its location.
const _: () = assert!(std::mem::size_of::<Text>() == 24);

impl Text {
    /// The longest text kept inline.
    pub const INLINE: usize = 22;

    /// The text as a string slice.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            // The bytes were copied whole from a `str`, so they are UTF-8.
            Repr::Inline { len, bytes } => std::str::from_utf8(&bytes[..*len as usize]).unwrap_or_default(),
            Repr::Heap(text) => text,
        }
    }

    /// The text's bytes, for comparing and hashing without checking them as UTF-8 again.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..*len as usize],
            Repr::Heap(text) => text.as_bytes(),
        }
    }
}

impl Default for Text {
    fn default() -> Self {
        Text(Repr::Inline { len: 0, bytes: [0; Text::INLINE] })
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        if text.len() > Text::INLINE {
            return Text(Repr::Heap(text.into()));
        }
        let mut bytes = [0; Text::INLINE];
        bytes[..text.len()].copy_from_slice(text.as_bytes());
        Text(Repr::Inline { len: text.len() as u8, bytes })
    }
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        if text.len() > Text::INLINE { Text(Repr::Heap(text.into_boxed_str())) } else { Text::from(text.as_str()) }
    }
}

impl From<Cow<'_, str>> for Text {
    fn from(text: Cow<'_, str>) -> Self {
        match text {
            Cow::Borrowed(text) => Text::from(text),
            Cow::Owned(text) => Text::from(text),
        }
    }
}

impl From<Text> for String {
    fn from(text: Text) -> Self {
        match text.0 {
            Repr::Heap(text) => text.into_string(),
            Repr::Inline { .. } => text.as_str().to_owned(),
        }
    }
}

impl Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

/// Lets a map keyed by texts be searched with bytes (`Hash` hashes the bytes, as `[u8]` does).
impl Borrow<[u8]> for Text {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Text {}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<Text> for str {
    fn eq(&self, other: &Text) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<Text> for &str {
    fn eq(&self, other: &Text) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<Text> for String {
    fn eq(&self, other: &Text) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialOrd for Text {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Byte order, which for UTF-8 is the order of `str`.
impl Ord for Text {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl Hash for Text {
    /// Hashes as the bytes it holds, as `Borrow<[u8]>` requires.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(TextVisitor)
    }
}

struct TextVisitor;

impl Visitor<'_> for TextVisitor {
    type Value = Text;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Text, E> {
        Ok(Text::from(v))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Text, E> {
        Ok(Text::from(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_read_back_whole_on_either_side_of_the_inline_limit() {
        let short = "a".repeat(Text::INLINE);
        let long = "a".repeat(Text::INLINE + 1);
        let wide = "é".repeat(11) + "x";
        for text in [String::new(), short, long, wide, "ünïcode".to_owned()] {
            assert_eq!(Text::from(text.as_str()).as_str(), text);
            assert_eq!(Text::from(text.clone()), Text::from(Cow::Owned(text.clone())));
            assert_eq!(String::from(Text::from(text.as_str())), text);
            assert_eq!(format!("{:?}", Text::from(text.as_str())), format!("{text:?}"));
            assert_eq!(format!("{}", Text::from(text.as_str())), text);
            let json = serde_json::to_string(&Text::from(text.as_str())).expect("a text serialises");
            assert_eq!(json, serde_json::to_string(&text).expect("a string serialises"));
            assert_eq!(serde_json::from_str::<Text>(&json).expect("a JSON string reads as a text"), text);
        }
        assert!(matches!(Text::from("a".repeat(Text::INLINE)).0, Repr::Inline { .. }));
        assert!(matches!(Text::from("a".repeat(Text::INLINE + 1)).0, Repr::Heap(_)));
        assert_eq!(Text::default(), "");
    }

    #[test]
    fn texts_order_and_hash_as_their_strings_bytes() {
        use std::collections::HashMap;
        let mut ids: Vec<Text> = ["b", "a", "ab", "é", "a".repeat(30).as_str()].map(Text::from).to_vec();
        ids.sort();
        let strings: Vec<&str> = ids.iter().map(Text::as_str).collect();
        let mut sorted = strings.clone();
        sorted.sort_unstable();
        assert_eq!(strings, sorted);
        let index: HashMap<Text, usize> = ids.iter().cloned().zip(0..).collect();
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(index.get(id.as_bytes()), Some(&i), "{id}");
        }
    }
}

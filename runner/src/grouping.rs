//! Keeping a human report readable when one problem repeats: of each code, the first
//! [`SHOWN_PER_CODE`] reports are drawn, and right after the last of them one line counts the
//! others and names where they are. Reports of codes that do not repeat that often keep their
//! order and their look, so small plans read as before. Machine formats keep every report.

use std::collections::{HashMap, HashSet};
use std::fmt::{Display, Write as _};
use std::hash::Hash;

/// How many reports of one code are drawn in full.
pub const SHOWN_PER_CODE: usize = 3;

/// How many places the summary line names before it only counts.
const NAMED_PLACES: usize = 10;

/// Which reports of a list are drawn, and after which ones a summary line follows.
pub struct Groups {
    shown: Vec<bool>,
    /// By the index of a code's last drawn report: the indices of its reports not drawn.
    rest: HashMap<usize, Vec<usize>>,
}

impl Groups {
    /// Groups reports by their codes, given in report order.
    pub fn new<'a>(codes: impl IntoIterator<Item = &'a str>) -> Self {
        let mut drawn: HashMap<&str, (usize, usize)> = HashMap::new();
        let mut hidden: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut shown = Vec::new();
        for (i, code) in codes.into_iter().enumerate() {
            let (count, last) = drawn.entry(code).or_insert((0, i));
            *count += 1;
            if *count <= SHOWN_PER_CODE {
                *last = i;
                shown.push(true);
            } else {
                hidden.entry(code).or_default().push(i);
                shown.push(false);
            }
        }
        let rest = hidden.into_iter().map(|(code, indices)| (drawn[code].1, indices)).collect();
        Groups { shown, rest }
    }

    /// Whether report `i` is drawn.
    pub fn is_shown(&self, i: usize) -> bool {
        self.shown.get(i).copied().unwrap_or(false)
    }

    /// The reports not drawn that a summary line after report `i` stands for.
    pub fn rest_after(&self, i: usize) -> Option<&[usize]> {
        self.rest.get(&i).map(Vec::as_slice)
    }

    /// How many reports are not drawn.
    pub fn hidden(&self) -> usize {
        self.rest.values().map(Vec::len).sum()
    }
}

/// The line that stands for reports not drawn, naming the first of their distinct places:
/// `… and 3,997 more `code` warnings at t3, t4, … and 3,987 other places`.
pub fn summary_line<P: Hash + Eq + Display>(
    count: usize,
    code: &str,
    kind: &str,
    places: impl Iterator<Item = P>,
) -> String {
    let mut line = format!("… and {} more `{code}` {kind}", thousands(count));
    let mut seen = HashSet::new();
    let mut named = Vec::new();
    for place in places {
        if named.len() < NAMED_PLACES && !seen.contains(&place) {
            named.push(place.to_string());
        }
        seen.insert(place);
    }
    if !named.is_empty() {
        line.push_str(" at ");
        line.push_str(&named.join(", "));
        let others = seen.len() - named.len();
        if others > 0 {
            let noun = if others == 1 { "place" } else { "places" };
            let _ = write!(line, " and {} other {noun}", thousands(others));
        }
    }
    line
}

/// A count with commas between thousands: `3,997`.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_reports_past_the_third_of_a_code_are_hidden() {
        let codes = ["a", "b", "a", "a", "c", "a", "b", "a"];
        let groups = Groups::new(codes);
        let shown: Vec<bool> = (0..codes.len()).map(|i| groups.is_shown(i)).collect();
        assert_eq!(shown, [true, true, true, true, true, false, true, false]);
        assert_eq!(groups.rest_after(3), Some(&[5, 7][..]), "after the third `a`");
        assert_eq!(groups.rest_after(6), None, "`b` does not repeat enough");
        assert_eq!(groups.hidden(), 2);
    }

    #[test]
    fn codes_that_do_not_repeat_are_all_shown() {
        let groups = Groups::new(["a", "b", "a", "c"]);
        assert!((0..4).all(|i| groups.is_shown(i)));
        assert_eq!(groups.hidden(), 0);
    }

    #[test]
    fn the_summary_names_ten_distinct_places_and_counts_the_others() {
        let places = (3..2000).map(|i| format!("t{i}")).chain((0..2000).map(|_| "sink".to_owned()));
        let line = summary_line(3_997, "critic::unread_dependency", "warnings", places);
        assert_eq!(
            line,
            "… and 3,997 more `critic::unread_dependency` warnings at t3, t4, t5, t6, t7, t8, t9, t10, t11, t12 \
             and 1,988 other places"
        );
        assert_eq!(summary_line(2, "x", "notes", std::iter::empty::<&str>()), "… and 2 more `x` notes");
    }

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}

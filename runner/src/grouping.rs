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

/// Which reports of a list are drawn, told one report at a time in list order: it holds a count
/// per code, never a list of the reports, so a list of 400,000 costs a few codes' room.
pub struct Groups<'a> {
    /// By code: how many reports it has in the whole list, and how many have been told so far.
    counts: HashMap<&'a str, (usize, usize)>,
}

/// What becomes of the next report of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Drawn in full.
    Drawn,
    /// Drawn in full, the last of its code to be: a summary line for the given number of later
    /// reports of its code follows it.
    DrawnThenSummary(usize),
    /// Not drawn: a summary line stands for it.
    Hidden,
}

impl<'a> Groups<'a> {
    /// Counts the reports of each code, given in report order.
    pub fn new(codes: impl IntoIterator<Item = &'a str>) -> Self {
        let mut counts = HashMap::new();
        for code in codes {
            counts.entry(code).or_insert((0, 0)).0 += 1;
        }
        Groups { counts }
    }

    /// The fate of the next report in list order, of code `code`.
    pub fn next(&mut self, code: &'a str) -> Fate {
        let (total, told) = self.counts.entry(code).or_insert((0, 0));
        *told += 1;
        if *told > SHOWN_PER_CODE {
            Fate::Hidden
        } else if *told == SHOWN_PER_CODE && *total > SHOWN_PER_CODE {
            Fate::DrawnThenSummary(*total - SHOWN_PER_CODE)
        } else {
            Fate::Drawn
        }
    }

    /// How many reports of the whole list are not drawn.
    pub fn hidden(&self) -> usize {
        self.counts.values().map(|(total, _)| total.saturating_sub(SHOWN_PER_CODE)).sum()
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

    fn fates(codes: &[&'static str]) -> (Vec<Fate>, usize) {
        let mut groups = Groups::new(codes.iter().copied());
        (codes.iter().map(|code| groups.next(code)).collect(), groups.hidden())
    }

    #[test]
    fn only_the_reports_past_the_third_of_a_code_are_hidden() {
        let (fates, hidden) = fates(&["a", "b", "a", "a", "c", "a", "b", "a"]);
        use Fate::{Drawn, DrawnThenSummary, Hidden};
        assert_eq!(fates, [Drawn, Drawn, Drawn, DrawnThenSummary(2), Drawn, Hidden, Drawn, Hidden]);
        assert_eq!(hidden, 2);
    }

    #[test]
    fn codes_that_do_not_repeat_are_all_shown() {
        let (fates, hidden) = fates(&["a", "b", "a", "c", "a"]);
        assert!(fates.iter().all(|f| *f == Fate::Drawn), "{fates:?}");
        assert_eq!(hidden, 0);
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

//! The deterministic extractive compactor: keeps the most informative whole lines or
//! sentences, in their original order, and marks every run of dropped ones.

use std::collections::{BTreeSet, HashMap};

use super::units::{self, Sep, Unit};
use crate::tokens::Meter;

/// Text compacted to a token budget, with what it cost before and after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    /// The compacted text; at most the budget in tokens.
    pub text: String,
    /// Tokens in the original text.
    pub tokens_before: usize,
    /// Tokens in `text`.
    pub tokens_after: usize,
    /// How many units (lines or sentences) were dropped.
    pub dropped: usize,
}

/// Compacts `text` to at most `budget` tokens: unchanged if it fits, otherwise the most
/// informative lines (sentences, in long prose lines) in their original order, each run of
/// dropped ones replaced by a marker such as `[… 3 lines dropped]`; never cuts inside a word.
pub fn compact(text: &str, budget: usize, meter: Meter<'_>) -> Compacted {
    let tokens_before = meter.count(text);
    if tokens_before <= budget {
        return Compacted { text: text.to_owned(), tokens_before, tokens_after: tokens_before, dropped: 0 };
    }
    let units = units::split(text, true);
    let fitted = fit(text, &units, budget, Measure::Tokens(meter), false);
    Compacted { text: fitted.text, tokens_before, tokens_after: fitted.size, dropped: fitted.dropped }
}

/// How a budget is measured.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Measure<'a> {
    Tokens(Meter<'a>),
    Chars,
}

impl Measure<'_> {
    pub(crate) fn of(self, text: &str) -> usize {
        match self {
            Measure::Tokens(meter) => meter.count(text),
            Measure::Chars => text.chars().count(),
        }
    }

    /// An upper bound on what the separators around a marker add.
    fn marker_slack(self) -> usize {
        match self {
            Measure::Tokens(_) => 2,
            Measure::Chars => 3,
        }
    }
}

/// Text fitted to a budget.
#[derive(Debug, Clone)]
pub(crate) struct Fitted {
    pub text: String,
    /// Its measure.
    pub size: usize,
    /// Units dropped.
    pub dropped: usize,
}

/// The marker line for a run of dropped units.
pub(crate) fn marker(lines: usize, sentences: usize) -> String {
    fn noun(n: usize, one: &str) -> String {
        if n == 1 { format!("1 {one}") } else { format!("{n} {one}s") }
    }
    match (lines, sentences) {
        (l, 0) => format!("[… {} dropped]", noun(l, "line")),
        (0, s) => format!("[… {} dropped]", noun(s, "sentence")),
        (l, s) => format!("[… {} and {} dropped]", noun(l, "line"), noun(s, "sentence")),
    }
}

/// Markers for runs of units, measured once per distinct (lines, sentences) pair.
struct Markers<'a> {
    units: &'a [Unit],
    /// `sentences[i]`: sentence units among the first `i`.
    sentences: Vec<usize>,
    measure: Measure<'a>,
    cache: HashMap<(usize, usize), usize>,
}

impl<'a> Markers<'a> {
    fn new(units: &'a [Unit], measure: Measure<'a>) -> Self {
        let mut sentences = Vec::with_capacity(units.len() + 1);
        sentences.push(0);
        for unit in units {
            sentences.push(sentences.last().copied().unwrap_or(0) + usize::from(unit.sentence));
        }
        Markers { units, sentences, measure, cache: HashMap::new() }
    }

    /// Lines and sentences among units `lo..hi`.
    fn split(&self, lo: usize, hi: usize) -> (usize, usize) {
        let sentences = self.sentences[hi] - self.sentences[lo];
        (hi - lo - sentences, sentences)
    }

    fn text(&self, lo: usize, hi: usize) -> String {
        let (lines, sentences) = self.split(lo, hi);
        marker(lines, sentences)
    }

    /// What a marker for units `lo..hi` costs, separators included; 0 for an empty run.
    fn cost(&mut self, lo: usize, hi: usize) -> usize {
        if lo >= hi.min(self.units.len()) {
            return 0;
        }
        let key = self.split(lo, hi);
        let measure = self.measure;
        *self.cache.entry(key).or_insert_with(|| measure.of(&marker(key.0, key.1)) + measure.marker_slack())
    }
}

/// Fits `text`, cut into `units`, into `budget` (in `measure`). With `pin_first`, the
/// first unit is kept before any other. The result never exceeds the budget.
pub(crate) fn fit(text: &str, units: &[Unit], budget: usize, measure: Measure<'_>, pin_first: bool) -> Fitted {
    let n = units.len();
    if n == 0 {
        return Fitted { text: String::new(), size: 0, dropped: 0 };
    }
    let costs: Vec<usize> =
        units.iter().map(|u| measure.of(&text[u.start..u.end]) + measure.of(u.sep.as_str())).collect();
    let priority: Vec<f64> = units
        .iter()
        .enumerate()
        .map(|(i, unit)| {
            if pin_first && i == 0 {
                return f64::INFINITY;
            }
            // Earlier units get a small bonus, the very first a little more.
            let position = 2.0 * (n - i) as f64 / n as f64 + if i == 0 { 2.0 } else { 0.0 };
            let score = f64::from(unit.score) + position;
            // Shorter units win ties of informativeness, but only mildly.
            let cost = (costs[i] + 4) as f64;
            if score > 0.0 { score / cost.powf(0.25) } else { score - cost }
        })
        .collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| priority[b].total_cmp(&priority[a]).then(a.cmp(&b)));

    let mut markers = Markers::new(units, measure);
    let mut target = budget;
    // Unit costs are measured apart; joined text can tokenize a little differently, so the
    // result is measured again and the selection redone against a smaller target if over.
    for _ in 0..4 {
        let Some(kept) = select(units, &costs, &order, target, &mut markers) else { break };
        let (out, dropped) = render(text, units, &kept, &markers);
        let size = measure.of(&out);
        if size <= budget {
            return Fitted { text: out, size, dropped };
        }
        target = target.saturating_sub(size - budget + 1);
    }
    truncate_best(text, units, order[0], budget, &mut markers).unwrap_or_else(|| {
        let out = word_prefix(text, budget, measure).to_owned();
        Fitted { size: measure.of(&out), text: out, dropped: 0 }
    })
}

/// Greedily keeps units in `order` while the estimated total (units, their parents and the
/// markers between them) stays within `target`; `None` if no unit fits.
fn select(units: &[Unit], costs: &[usize], order: &[usize], target: usize, markers: &mut Markers) -> Option<Vec<bool>> {
    let n = units.len();
    let mut kept = vec![false; n];
    let mut set = BTreeSet::new();
    let mut used = markers.cost(0, n) as isize;
    let target = target as isize;
    let mut chain = Vec::new();
    for &i in order {
        if kept[i] || costs[i] as isize > target {
            continue;
        }
        chain.clear();
        let mut next = Some(i);
        while let Some(u) = next {
            if !kept[u] {
                chain.push(u);
            }
            next = units[u].parent;
        }
        let before = used;
        for &u in &chain {
            let lo = set.range(..u).next_back().map_or(0, |&p| p + 1);
            let hi = set.range(u + 1..).next().copied().unwrap_or(n);
            used += costs[u] as isize + markers.cost(lo, u) as isize + markers.cost(u + 1, hi) as isize
                - markers.cost(lo, hi) as isize;
            set.insert(u);
            kept[u] = true;
        }
        if used > target {
            for &u in &chain {
                set.remove(&u);
                kept[u] = false;
            }
            used = before;
        }
    }
    (!set.is_empty()).then_some(kept)
}

/// The kept units in order, with their original separators, and a marker for each run of
/// dropped ones; also how many were dropped.
fn render(text: &str, units: &[Unit], kept: &[bool], markers: &Markers) -> (String, usize) {
    let mut out = String::new();
    let mut dropped = 0;
    let mut after_marker = false;
    let mut i = 0;
    while i < units.len() {
        let unit = &units[i];
        let sep = if out.is_empty() {
            ""
        } else if after_marker && unit.sep != Sep::Space {
            "\n"
        } else {
            unit.sep.as_str()
        };
        out.push_str(sep);
        if kept[i] {
            out.push_str(&text[unit.start..unit.end]);
            after_marker = false;
            i += 1;
        } else {
            let end = (i..units.len()).find(|&j| kept[j]).unwrap_or(units.len());
            out.push_str(&markers.text(i, end));
            dropped += end - i;
            after_marker = true;
            i = end;
        }
    }
    (out, dropped)
}

/// When no unit fits whole: the best unit cut at a word boundary and ended with `…`,
/// between markers for everything else.
fn truncate_best(text: &str, units: &[Unit], best: usize, budget: usize, markers: &mut Markers) -> Option<Fitted> {
    let measure = markers.measure;
    let n = units.len();
    let around = markers.cost(0, best) + markers.cost(best + 1, n);
    let room = budget.checked_sub(around + measure.of("…"))?;
    let unit = &units[best];
    let words = word_prefix(&text[unit.start..unit.end], room, measure);
    if words.is_empty() {
        return None;
    }
    let mut out = String::new();
    if best > 0 {
        out.push_str(&markers.text(0, best));
        out.push('\n');
    }
    out.push_str(words);
    out.push('…');
    if best + 1 < n {
        out.push('\n');
        out.push_str(&markers.text(best + 1, n));
    }
    let size = measure.of(&out);
    (size <= budget).then_some(Fitted { text: out, size, dropped: n - 1 })
}

/// The longest prefix of `text` that ends at the end of a word and measures at most
/// `budget`; possibly empty.
pub(crate) fn word_prefix<'t>(text: &'t str, budget: usize, measure: Measure<'_>) -> &'t str {
    // No token or char is longer than this many bytes, so a fitting prefix is no longer.
    let cap = match measure {
        Measure::Tokens(_) => budget.saturating_add(1).saturating_mul(256),
        Measure::Chars => budget.saturating_add(1).saturating_mul(4),
    };
    if text.len() <= cap && measure.of(text) <= budget {
        return text;
    }
    let mut ends = Vec::new();
    let mut previous = None;
    for (at, c) in text.char_indices() {
        if at > cap {
            break;
        }
        if c.is_whitespace() && previous.is_some_and(|p: char| !p.is_whitespace()) {
            ends.push(at);
        }
        previous = Some(c);
    }
    // Measures grow with the prefix (all but always, for tokens): binary search, keeping
    // only prefixes that were actually measured to fit.
    let (mut lo, mut hi) = (0, ends.len());
    let mut best = 0;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if measure.of(&text[..ends[mid]]) <= budget {
            best = ends[mid];
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    &text[..best]
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    use crate::tokens::test_counter::{T, count};

    /// Every word of `output` outside markers (and a trailing `…`) is a word of `input`.
    pub(crate) fn words_are_whole(input: &str, output: &str) -> bool {
        let inputs: std::collections::HashSet<&str> = input.split_whitespace().collect();
        let stripped = strip_markers(output);
        stripped
            .split_whitespace()
            .all(|w| inputs.contains(w) || w.strip_suffix('…').is_some_and(|w| w.is_empty() || inputs.contains(w)))
    }

    pub(crate) fn strip_markers(text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(at) = rest.find('[') {
            let tail = &rest[at..];
            let close = tail.find(']').map(|c| &tail[..=c]);
            match close {
                Some(m) if is_marker(m) => {
                    out.push_str(&rest[..at]);
                    out.push(' ');
                    rest = &tail[m.len()..];
                }
                _ => {
                    out.push_str(&rest[..=at]);
                    rest = &rest[at + 1..];
                }
            }
        }
        out.push_str(rest);
        out
    }

    fn is_marker(m: &str) -> bool {
        (m.starts_with("[… ") && (m.ends_with(" dropped]") || m.ends_with(" folded]")))
            || (m.starts_with("[previous line repeated ") || m.starts_with("[similar line repeated "))
    }

    fn log(lines: usize) -> String {
        (0..lines)
            .map(|i| match i % 5 {
                0 => format!("INFO step {i} ok"),
                1 => "".to_owned(),
                2 => format!("ERROR failed to open src/module_{i}.rs:{i}"),
                3 => "ok".to_owned(),
                _ => format!("note that we waited {i} ms for Postgres at https://db.example.com/{i}"),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn text_that_fits_is_unchanged() {
        let text = "Short text.\n\nWith two lines.  ";
        let result = compact(text, 100, T);
        assert_eq!(result.text, text);
        assert_eq!(result.dropped, 0);
        assert_eq!(result.tokens_before, result.tokens_after);
    }

    #[test]
    fn keeps_informative_lines_in_order_and_marks_drops() {
        let text = log(60);
        let result = compact(&text, 120, T);
        assert!(result.tokens_after <= 120, "{}", result.tokens_after);
        assert_eq!(count(&result.text), result.tokens_after);
        assert!(result.text.contains("ERROR failed to open src/module_2.rs:2"), "{}", result.text);
        assert!(result.text.contains("dropped]"));
        assert!(words_are_whole(&text, &result.text));
        // Kept lines appear in their original order.
        let mut at = 0;
        for line in result.text.lines().filter(|l| !l.starts_with("[…")) {
            let found = text[at..].find(line).expect("kept line is in the input after the previous one");
            at += found + line.len();
        }
    }

    #[test]
    fn markers_count_dropped_lines() {
        let text: String = (0..40).map(|i| format!("line {i}: value {i}\n")).collect();
        let result = compact(&text, 60, T);
        let kept = result.text.lines().filter(|l| !l.starts_with("[…")).count();
        let marked: usize = result
            .text
            .lines()
            .filter_map(|l| l.strip_prefix("[… "))
            .map(|l| l.split(' ').next().and_then(|n| n.parse::<usize>().ok()).unwrap_or(0))
            .sum();
        assert_eq!(kept + marked, 40, "{}", result.text);
        assert_eq!(marked, result.dropped);
    }

    #[test]
    fn headings_of_kept_lines_are_kept() {
        let mut text = String::from("# Report\n\n");
        for section in 0..6 {
            text.push_str(&format!("## Section {section}\n"));
            for line in 0..8 {
                text.push_str(&format!("plain words here and there {line}\n"));
            }
            if section == 4 {
                text.push_str("error: cannot connect to db.internal:5432 (Connection refused)\n");
            }
            text.push('\n');
        }
        let result = compact(&text, 60, T);
        let error = result.text.find("error: cannot connect");
        let error = error.unwrap_or_else(|| panic!("the error line is dropped:\n{}", result.text));
        let heading = result.text.find("## Section 4").expect("its heading is kept");
        assert!(heading < error);
        assert!(result.text.starts_with("# Report"), "{}", result.text);
    }

    #[test]
    fn long_prose_drops_sentences() {
        let text = "The build of Runner 2.3 failed on Tuesday. It was raining outside and nobody really cared much about it. \
                    The root cause was src/state.rs:88 returning None. We had lunch and it was nice, as usual, nothing else. \
                    Everyone went home afterwards and slept well through the night without dreams."
            .to_owned();
        let result = compact(&text, 50, T);
        assert!(result.tokens_after <= 50);
        assert!(result.text.contains("src/state.rs:88"), "{}", result.text);
        assert!(result.text.contains("sentence"), "{}", result.text);
        assert!(words_are_whole(&text, &result.text));
    }

    #[test]
    fn a_single_long_unit_is_cut_at_a_word() {
        let text = "word ".repeat(500);
        let result = compact(&text, 10, T);
        assert!(result.tokens_after <= 10);
        assert!(result.text.ends_with("word…"), "{:?}", result.text);
    }

    #[test]
    fn tiny_budgets_give_a_word_prefix_or_nothing() {
        let text = log(30);
        for budget in 0..12 {
            let result = compact(&text, budget, T);
            assert!(result.tokens_after <= budget);
            assert_eq!(count(&result.text), result.tokens_after);
            assert!(words_are_whole(&text, &result.text), "{budget}: {:?}", result.text);
        }
        assert_eq!(compact(&text, 0, T).text, "");
    }

    #[test]
    fn is_deterministic() {
        let text = log(200);
        assert_eq!(compact(&text, 150, T), compact(&text, 150, T));
    }

    #[test]
    fn marker_wording() {
        assert_eq!(marker(1, 0), "[… 1 line dropped]");
        assert_eq!(marker(3, 0), "[… 3 lines dropped]");
        assert_eq!(marker(0, 2), "[… 2 sentences dropped]");
        assert_eq!(marker(2, 1), "[… 2 lines and 1 sentence dropped]");
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        fn texts() -> impl Strategy<Value = String> {
            prop_oneof![
                any::<String>(),
                "[a-zA-Z0-9 .,:/#\n\t-]{0,400}",
                proptest::collection::vec("(# |- |  |)[A-Za-z0-9éü日本 ./:]{0,60}[.!?]? ?", 0..40)
                    .prop_map(|v| v.join("\n")),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            #[test]
            fn never_exceeds_the_budget_nor_cuts_words(text in texts(), budget in 0usize..500) {
                let result = compact(&text, budget, T);
                prop_assert!(count(&result.text) <= budget);
                prop_assert_eq!(count(&result.text), result.tokens_after);
                if result.tokens_before <= budget {
                    prop_assert_eq!(&result.text, &text);
                }
                prop_assert!(words_are_whole(&text, &result.text), "{:?}", result.text);
            }

            #[test]
            fn keeps_lines_in_order(lines in proptest::collection::vec("[a-z]{1,8}( [A-Z0-9][a-z0-9]{0,6}){0,6}", 1..60), budget in 10usize..200) {
                let numbered: Vec<String> = lines.iter().enumerate().map(|(i, l)| format!("L{i} {l}")).collect();
                let text = numbered.join("\n");
                let result = compact(&text, budget, T);
                let kept: Vec<usize> = result
                    .text
                    .lines()
                    .filter_map(|l| l.strip_prefix('L')?.split(' ').next()?.parse().ok())
                    .collect();
                prop_assert!(kept.windows(2).all(|w| w[0] < w[1]), "{:?}", kept);
            }
        }
    }
}

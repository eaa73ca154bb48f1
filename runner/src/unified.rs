//! A unified diff of a text and the same text with edits applied, made from the edits
//! themselves: the lines they touch, with three lines of context.

use std::fmt::Write as _;

use manifest::fix::Edit;

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// The unified diff (`--- a/NAME`, `+++ b/NAME`, hunks) of `text` and `text` with `edits`
/// applied; empty when they change nothing. Edits must not overlap.
pub fn diff(name: &str, text: &str, edits: &[Edit]) -> String {
    let starts: Vec<usize> = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
    let line_of = |offset: usize| starts.partition_point(|&s| s <= offset) - 1;
    let line_count = if text.ends_with('\n') { starts.len() - 1 } else { starts.len() };
    let mut sorted: Vec<&Edit> = edits.iter().collect();
    sorted.sort_by_key(|e| e.span.offset());
    // Each change: the old lines it covers (first, past-last) and the edits inside them.
    let mut changes: Vec<(usize, usize, Vec<&Edit>)> = Vec::new();
    for edit in sorted {
        let first = line_of(edit.span.offset());
        let last = line_of((edit.span.offset() + edit.span.len()).saturating_sub(1).max(edit.span.offset()));
        let end = (last + 1).min(line_count.max(first + 1));
        match changes.last_mut() {
            Some((_, past, inside)) if first < *past => {
                *past = (*past).max(end);
                inside.push(edit);
            }
            _ => changes.push((first, end, vec![edit])),
        }
    }
    let line = |i: usize| -> &str {
        let end = starts.get(i + 1).copied().unwrap_or(text.len());
        text.get(starts.get(i).copied().unwrap_or(text.len())..end).unwrap_or("")
    };
    let mut out = String::new();
    let mut i = 0;
    let mut shift: isize = 0;
    while i < changes.len() {
        // A hunk takes every change whose context touches the next one's.
        let mut j = i;
        while j + 1 < changes.len() && changes[j + 1].0 <= changes[j].1 + 2 * CONTEXT {
            j += 1;
        }
        let from = changes[i].0.saturating_sub(CONTEXT);
        let to = (changes[j].1 + CONTEXT).min(line_count);
        let mut body = String::new();
        let (mut old_lines, mut new_lines) = (0, 0);
        let mut at = from;
        for (first, past, inside) in &changes[i..=j] {
            for k in at..*first {
                push_line(&mut body, ' ', line(k));
                old_lines += 1;
                new_lines += 1;
            }
            let old_start = starts[*first];
            let old_end = starts.get(*past).copied().unwrap_or(text.len());
            let old = &text[old_start..old_end];
            let shifted: Vec<Edit> = inside
                .iter()
                .map(|e| Edit {
                    span: manifest::Span::new(e.span.offset() - old_start, e.span.len()),
                    text: e.text.clone(),
                })
                .collect();
            let (new, _) = manifest::fix::apply(old, &shifted);
            for removed in old.split_inclusive('\n') {
                push_line(&mut body, '-', removed);
                old_lines += 1;
            }
            for added in new.split_inclusive('\n') {
                push_line(&mut body, '+', added);
                new_lines += 1;
            }
            at = *past;
        }
        for k in at..to {
            push_line(&mut body, ' ', line(k));
            old_lines += 1;
            new_lines += 1;
        }
        let new_from = (from as isize + shift).max(0) as usize;
        let _ = writeln!(out, "@@ -{} +{} @@", range(from, old_lines), range(new_from, new_lines));
        out.push_str(&body);
        shift += new_lines as isize - old_lines as isize;
        i = j + 1;
    }
    if out.is_empty() {
        return out;
    }
    format!("--- a/{name}\n+++ b/{name}\n{out}")
}

/// The edits that turn `before` into `after`, line by line: each replaces a run of whole lines
/// of `before` with lines of `after`. Myers' greedy diff, so its time grows with the lines
/// changed rather than with the square of the file.
pub fn line_edits(before: &str, after: &str) -> Vec<Edit> {
    let old: Vec<&str> = before.split_inclusive('\n').collect();
    let new: Vec<&str> = after.split_inclusive('\n').collect();
    let (n, m) = (old.len() as isize, new.len() as isize);
    let max = (n + m) as usize;
    let offset = max as isize + 1;
    let mut v = vec![0isize; 2 * max + 3];
    let mut trace: Vec<Vec<isize>> = Vec::new();
    'search: for d in 0..=max as isize {
        trace.push(v.clone());
        let mut k = -d;
        while k <= d {
            let at = (k + offset) as usize;
            let mut x = if k == -d || (k != d && v[at - 1] < v[at + 1]) { v[at + 1] } else { v[at - 1] + 1 };
            let mut y = x - k;
            while x < n && y < m && old[x as usize] == new[y as usize] {
                x += 1;
                y += 1;
            }
            v[at] = x;
            if x >= n && y >= m {
                break 'search;
            }
            k += 2;
        }
    }
    // Walk back from the end: each step is a line kept, removed or added.
    let (mut x, mut y) = (n, m);
    let mut steps: Vec<(isize, isize, isize, isize)> = Vec::new();
    for (d, v) in trace.iter().enumerate().rev() {
        let d = d as isize;
        let k = x - y;
        let at = |k: isize| v[(k + offset) as usize];
        let previous = if k == -d || (k != d && at(k - 1) < at(k + 1)) { k + 1 } else { k - 1 };
        let (px, py) = if d == 0 { (0, 0) } else { (at(previous), at(previous) - previous) };
        while x > px && y > py && x > 0 && y > 0 && old[(x - 1) as usize] == new[(y - 1) as usize] {
            x -= 1;
            y -= 1;
        }
        if d > 0 {
            steps.push((px, py, x, y));
        }
        (x, y) = (px, py);
    }
    steps.reverse();
    let starts: Vec<usize> = std::iter::once(0)
        .chain(old.iter().scan(0, |at, line| {
            *at += line.len();
            Some(*at)
        }))
        .collect();
    let new_starts: Vec<usize> = std::iter::once(0)
        .chain(new.iter().scan(0, |at, line| {
            *at += line.len();
            Some(*at)
        }))
        .collect();
    let mut edits: Vec<Edit> = Vec::new();
    for (px, py, x, y) in steps {
        let (old_range, new_range) = ((px as usize, x as usize), (py as usize, y as usize));
        let span = manifest::Span::new(starts[old_range.0], starts[old_range.1] - starts[old_range.0]);
        let text = after[new_starts[new_range.0]..new_starts[new_range.1]].to_owned();
        match edits.last_mut() {
            Some(last) if last.span.offset() + last.span.len() == span.offset() => {
                last.span = manifest::Span::new(last.span.offset(), last.span.len() + span.len());
                last.text.push_str(&text);
            }
            _ => edits.push(Edit { span, text }),
        }
    }
    edits
}

/// A hunk's range in unified form: `START,COUNT`, from 1 (an empty range names the line before).
fn range(from: usize, count: usize) -> String {
    if count == 0 { format!("{from},0") } else { format!("{},{count}", from + 1) }
}

/// One diff line; a last line without a newline is marked as `diff` marks it.
fn push_line(out: &mut String, mark: char, line: &str) {
    out.push(mark);
    out.push_str(line);
    if !line.ends_with('\n') {
        out.push_str("\n\\ No newline at end of file\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use manifest::Span;

    fn edit(text: &str, word: &str, with: &str) -> Edit {
        Edit { span: Span::new(text.find(word).expect("the test text holds the word"), word.len()), text: with.into() }
    }

    #[test]
    fn a_change_shows_with_three_lines_of_context() {
        let text = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let diff = diff("plan.yaml", text, &[edit(text, "e", "E")]);
        assert_eq!(diff, "--- a/plan.yaml\n+++ b/plan.yaml\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n");
    }

    #[test]
    fn a_removed_line_and_an_added_one_count_in_their_ranges() {
        let text = "a\nb\nc\n";
        let removed = Edit { span: Span::new(2, 2), text: String::new() };
        assert_eq!(diff("p", text, &[removed]), "--- a/p\n+++ b/p\n@@ -1,3 +1,2 @@\n a\n-b\n c\n");
        let added = Edit { span: Span::new(1, 0), text: "\nx".into() };
        assert_eq!(diff("p", text, &[added]), "--- a/p\n+++ b/p\n@@ -1,3 +1,4 @@\n-a\n+a\n+x\n b\n c\n");
    }

    #[test]
    fn far_apart_changes_make_two_hunks_and_the_second_counts_the_first_one_s_lines() {
        let text: String = (0..20).map(|i| format!("l{i}\n")).collect();
        let edits = [
            Edit { span: Span::new(text.find("l2\n").unwrap_or(0), 3), text: String::new() },
            edit(&text, "l15", "L15"),
        ];
        let diff = diff("p", &text, &edits);
        assert!(diff.contains("@@ -1,6 +1,5 @@\n l0\n l1\n-l2\n l3\n"), "{diff}");
        assert!(diff.contains("@@ -13,7 +12,7 @@\n l12\n l13\n l14\n-l15\n+L15\n"), "{diff}");
    }

    #[test]
    fn line_edits_turn_one_text_into_the_other() {
        for (before, after) in [
            ("a\nb\nc\n", "a\nB\nc\n"),
            ("a\nb\nc\n", "a\nc\n"),
            ("a\nb\n", "a\nx\nb\n"),
            ("", "a\n"),
            ("a\n", ""),
            ("a\nb\nc\nd\n", "b\nc\nd\ne\n"),
            ("same\n", "same\n"),
        ] {
            let edits = line_edits(before, after);
            assert_eq!(manifest::fix::apply(before, &edits).0, after, "{before:?} to {after:?}: {edits:?}");
        }
        assert!(line_edits("same\n", "same\n").is_empty());
        let text: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let changed = text.replace("line 500\n", "line five hundred\n");
        assert_eq!(line_edits(&text, &changed).len(), 1);
    }

    #[test]
    fn no_edits_no_diff() {
        assert_eq!(diff("p", "a\n", &[]), "");
    }
}

//! The rolling context summary: one `## task` section per finished task, merged under a
//! token budget, older sections compacted harder than newer ones.

use super::extract::compact;
use crate::tokens::Meter;

/// One `## task` section of a summary, or the text before the first one.
#[derive(Debug, Clone)]
struct Section {
    heading: Option<String>,
    body: String,
}

impl Section {
    fn render(&self, body: &str) -> String {
        match (&self.heading, body.is_empty()) {
            (Some(heading), true) => format!("## {heading}"),
            (Some(heading), false) => format!("## {heading}\n{body}"),
            (None, _) => body.to_owned(),
        }
    }
}

/// The summary after task `task` succeeded with `output`: `summary` plus a `## {task}`
/// section holding the output (replacing an earlier section for the same task), all within
/// `budget` tokens. Older sections are compacted harder than newer ones; every heading
/// stays while the headings alone fit. Deterministic.
pub fn merge(summary: &str, task: &str, output: &str, budget: usize, meter: Meter<'_>) -> String {
    let task = task.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut sections = parse(summary);
    sections.retain(|s| s.heading.as_deref() != Some(task.as_str()));
    sections.push(Section { heading: Some(task), body: demote(output.trim()) });
    fit(&sections, budget, meter)
}

/// Splits a summary at its `## ` lines.
fn parse(summary: &str) -> Vec<Section> {
    let mut sections = Vec::new();
    let mut current = Section { heading: None, body: String::new() };
    for line in summary.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            sections.push(current);
            current = Section { heading: Some(heading.trim().to_owned()), body: String::new() };
        } else {
            current.body.push_str(line);
            current.body.push('\n');
        }
    }
    sections.push(current);
    for section in &mut sections {
        section.body = section.body.trim_matches('\n').trim_end().to_owned();
    }
    sections.retain(|s| s.heading.is_some() || !s.body.is_empty());
    sections
}

/// Pushes the output's own `##` headings one level down so they cannot be mistaken for
/// task sections.
fn demote(output: &str) -> String {
    output
        .lines()
        .map(|line| if line.starts_with("## ") || line == "##" { format!("#{line}") } else { line.to_owned() })
        .collect::<Vec<_>>()
        .join("\n")
}

fn render(sections: &[Section], bodies: &[String]) -> String {
    sections.iter().zip(bodies).map(|(s, b)| s.render(b)).collect::<Vec<_>>().join("\n\n")
}

fn fit(sections: &[Section], budget: usize, meter: Meter<'_>) -> String {
    let whole: Vec<String> = sections.iter().map(|s| s.body.clone()).collect();
    let full = render(sections, &whole);
    if meter.count(&full) <= budget {
        return full;
    }
    // A heading costs its own tokens plus the separators around it.
    let heads: Vec<usize> =
        sections.iter().map(|s| s.heading.as_ref().map_or(0, |h| meter.count(&format!("## {h}")) + 2)).collect();
    let mut first = 0;
    while first < sections.len() && heads[first..].iter().sum::<usize>() > budget {
        first += 1;
    }
    let live = &sections[first..];
    if live.iter().all(|s| s.heading.is_none()) {
        return compact(&full, budget, meter).text;
    }
    let needs: Vec<usize> = live.iter().map(|s| if s.body.is_empty() { 0 } else { meter.count(&s.body) + 1 }).collect();
    let weights: Vec<usize> = (1..=live.len()).collect();
    let mut room = budget - heads[first..].iter().sum::<usize>();
    for _ in 0..4 {
        let shares = allocate(&needs, &weights, room);
        let bodies: Vec<String> = live
            .iter()
            .zip(needs.iter().zip(&shares))
            .map(
                |(s, (&need, &share))| {
                    if share >= need { s.body.clone() } else { compact(&s.body, share.saturating_sub(1), meter).text }
                },
            )
            .collect();
        let out = render(live, &bodies);
        let size = meter.count(&out);
        if size <= budget {
            return out;
        }
        room = room.saturating_sub(size - budget + 1);
    }
    compact(&render(live, &whole[first..]), budget, meter).text
}

/// Splits `room` among sections in proportion to `weights`, giving none more than it
/// needs and handing what a section leaves over to the others.
fn allocate(needs: &[usize], weights: &[usize], room: usize) -> Vec<usize> {
    let mut shares = vec![0; needs.len()];
    let mut open: Vec<usize> = (0..needs.len()).filter(|&i| needs[i] > 0).collect();
    let mut left = room;
    while !open.is_empty() {
        let total: usize = open.iter().map(|&i| weights[i]).sum();
        let fair = |i: usize| left * weights[i] / total.max(1);
        let (satisfied, wanting): (Vec<usize>, Vec<usize>) = open.iter().partition(|&&i| needs[i] <= fair(i));
        if satisfied.is_empty() {
            let given: Vec<usize> = wanting.iter().map(|&i| fair(i)).collect();
            for (&i, &g) in wanting.iter().zip(&given) {
                shares[i] = g;
            }
            // Rounding leftovers go to the newest section.
            if let Some(&newest) = wanting.last() {
                shares[newest] += left - given.iter().sum::<usize>();
            }
            break;
        }
        for &i in &satisfied {
            shares[i] = needs[i];
            left -= needs[i];
        }
        open = wanting;
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::tokens::test_counter::{T, count};

    fn report(task: &str, lines: usize) -> String {
        (0..lines)
            .map(|i| format!("- {task} finding {i}: measured {} ms on host-{i}.example.com", i * 7))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn first_merge_makes_a_section() {
        assert_eq!(merge("", "search", "Found 3 papers.", 100, T), "## search\nFound 3 papers.");
        let two = merge("## search\nFound 3 papers.", "rank", "Ranked them.", 100, T);
        assert_eq!(two, "## search\nFound 3 papers.\n\n## rank\nRanked them.");
    }

    #[test]
    fn stays_within_budget_and_keeps_every_heading() {
        let mut summary = String::new();
        for (i, task) in ["search", "fetch", "parse", "rank", "write"].iter().enumerate() {
            summary = merge(&summary, task, &report(task, 20 + i), 200, T);
            assert!(count(&summary) <= 200, "{summary}");
        }
        for task in ["search", "fetch", "parse", "rank", "write"] {
            assert!(summary.contains(&format!("## {task}")), "{summary}");
        }
    }

    #[test]
    fn older_sections_give_way_first() {
        let summary = merge("", "old", &report("old", 40), 10_000, T);
        let merged = merge(&summary, "new", &report("new", 40), 400, T);
        let (old, new) = merged.split_once("## new").expect("the new section is there");
        assert!(count(old) < count(new), "{merged}");
    }

    #[test]
    fn rerun_task_replaces_its_section_and_headings_in_output_are_demoted() {
        let summary = merge("## a\nfirst\n\n## b\nsecond", "a", "## Results\nthird", 100, T);
        assert_eq!(summary, "## b\nsecond\n\n## a\n### Results\nthird");
    }

    #[test]
    fn headings_give_way_oldest_first_when_even_they_do_not_fit() {
        let mut summary = String::new();
        for i in 0..30 {
            summary = merge(&summary, &format!("task_{i}"), "done", 40, T);
            assert!(count(&summary) <= 40);
        }
        assert!(summary.contains("## task_29"), "{summary}");
        assert!(!summary.contains("## task_0\n"), "{summary}");
        assert!(merge(&summary, "x", "y", 0, T).is_empty());
    }

    #[test]
    fn is_deterministic() {
        let a = merge(&report("s", 30), "t", &report("t", 30), 150, T);
        let b = merge(&report("s", 30), "t", &report("t", 30), 150, T);
        assert_eq!(a, b);
    }

    #[test]
    fn allocation_favours_newer_sections() {
        assert_eq!(allocate(&[10, 10], &[1, 2], 100), vec![10, 10]);
        assert_eq!(allocate(&[100, 100], &[1, 2], 90), vec![30, 60]);
        assert_eq!(allocate(&[5, 100, 100], &[1, 2, 3], 105), vec![5, 40, 60]);
        assert_eq!(allocate(&[0, 0], &[1, 2], 10), vec![0, 0]);
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(32))]

            #[test]
            fn never_exceeds_the_budget(summary in any::<String>(), output in "[a-zA-Z0-9 #.:\n-]{0,300}", budget in 0usize..300) {
                let merged = merge(&summary, "task", &output, budget, T);
                prop_assert!(count(&merged) <= budget);
            }
        }
    }
}

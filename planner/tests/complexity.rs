//! The complexity detector on a table of requests with the expected verdict.

use planner::complexity::{Complexity, assess};

use Complexity::{Planned, Simple};

const CASES: &[(&str, Complexity)] = &[
    // One step.
    ("rooms", Simple),
    ("Fix it", Simple),
    ("Summarise it", Simple),
    ("Write a poem about the sea", Simple),
    ("Translate this document to French", Simple),
    ("What is the capital of France?", Simple),
    ("Which database should we use?", Simple),
    ("Test the login flow.", Simple),
    ("Run `npm install && npm test`", Simple),
    ("npm run build", Simple),
    ("Book a flight to Paris and a hotel", Simple),
    ("Deploy to staging or production", Simple),
    ("Summarise the article in one or two paragraphs.", Simple),
    ("Please summarise https://example.com/a.html, then b.html", Simple),
    ("I'm not sure about the color scheme.", Simple),
    ("Find the file that has the most 3s in its name", Simple),
    ("Compare Rust and Go for CLI tools", Simple),
    ("Explain `fetch && summarise && email`", Simple),
    ("", Simple),
    // Needs a plan.
    ("Fetch the news, summarise it and email it to me", Planned),
    ("- Fetch the news\n- Summarise it\n- Email me the summary", Planned),
    ("1) clone the repo\n2) build it", Planned),
    ("- [ ] write tests\n- [x] fix the bug", Planned),
    ("create room333 and add a tool that finds files with most 3s", Planned),
    ("create room333, add a most3s tool, update the suggestion", Planned),
    (
        "Add login with session cookies. Use basic auth. Read API spec at https://example.com/spec.pdf. Then write unit tests.",
        Planned,
    ),
    ("Download the report; afterwards summarise it", Planned),
    ("Write the migration and then run it against the test database.", Planned),
    ("Check the CI logs. If the build failed, fix it.", Planned),
    ("I want you to fetch the page and then translate the result", Planned),
    ("Scrape https://news.ycombinator.com; store the titles in ./notes.md", Planned),
    ("Download the dataset. Then it should be cleaned.", Planned),
    ("Collect the metrics, then plot them", Planned),
    ("Research competitors.\nDraft the pitch deck.", Planned),
    ("Ask the user for their API key, then call the API.", Planned),
    ("Visit https://example.com and summarise it.", Planned),
];

#[test]
fn requests_get_the_expected_verdict() {
    assert!(CASES.len() >= 30);
    let mut failures = Vec::new();
    for (request, expected) in CASES {
        let assessment = assess(request);
        assert!(!assessment.reasons.is_empty(), "{request:?} has no reason");
        if assessment.complexity != *expected {
            failures.push(format!("{request:?}: expected {expected:?}, got {assessment:?}"));
        }
    }
    assert!(failures.is_empty(), "{} of {} differ:\n{}", failures.len(), CASES.len(), failures.join("\n"));
}

#[test]
fn reasons_name_what_was_found() {
    let assessment = assess("Fetch the news, summarise it and email it to me");
    assert_eq!(
        assessment.reasons,
        ["3 action verbs: fetch, summarise, email", "`and` joins two actions", "refers back to an earlier step: `it`"]
    );
    assert_eq!(assess("- a\n- b\n- c").reasons, ["a list of 3 items"]);
    assert_eq!(assess("Fix it").reasons, ["one action: fix"]);
    assert_eq!(assess("rooms").reasons, ["no action verb"]);
    assert_eq!(assess(" \n ").reasons, ["empty request"]);
    assert_eq!(
        assess("Research competitors.\nDraft the pitch deck.").reasons,
        ["2 action verbs: research, draft", "2 sentences with actions"]
    );
}

#[test]
fn references_to_the_conversation_do_not_need_a_plan() {
    // `it` in the only clause points outside the request.
    assert_eq!(assess("Fix it").complexity, Simple);
    assert_eq!(assess("Download the report, then summarise it").complexity, Planned);
    assert_eq!(Planned.as_str(), "planned");
}

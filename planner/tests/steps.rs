//! Splitting requests into steps: a table of requests with the steps, kinds and attachments
//! each gives.

use planner::steps::{Kind, Step, classify, split};

/// The files that exist in these tests, relative to the caller's base directory.
fn exists(file: &str) -> bool {
    matches!(file, "./notes.md" | "../data/input.csv" | "docs/spec.md" | "README.md" | "./scripts/build.sh")
}

/// A step as one line: `kind: text | @link | +file`.
fn show(step: &Step) -> String {
    let mut line = format!("{}: {}", step.kind, step.text);
    for link in &step.links {
        line.push_str(&format!(" | @{link}"));
    }
    for file in &step.files {
        line.push_str(&format!(" | +{file}"));
    }
    line
}

const CASES: &[(&str, &[&str])] = &[
    // The seeds' example: four sentences, one connector, the link on the third.
    (
        "Add login with session cookies. Use basic auth. Read API spec at https://example.com/spec.pdf. Then write unit tests.",
        &[
            "processing: Add login with session cookies",
            "processing: Use basic auth",
            "tool: Read API spec at https://example.com/spec.pdf | @https://example.com/spec.pdf",
            "processing: Write unit tests",
        ],
    ),
    // Lists.
    (
        "- Fetch the news\n- Summarise it\n- Email me the summary",
        &["tool: Fetch the news", "processing: Summarise it", "processing: Email me the summary"],
    ),
    (
        "1. Install dependencies\n2. Run `cargo test`\n3. Deploy to staging",
        &["tool: Install dependencies", "tool: Run `cargo test`", "tool: Deploy to staging"],
    ),
    ("1) clone the repo\n2) build it\na) test it", &["tool: clone the repo", "tool: build it", "tool: test it"]),
    (
        "* Research competitors\n* Draft the pitch deck",
        &["processing: Research competitors", "processing: Draft the pitch deck"],
    ),
    ("• Grep the logs for errors\r\n• Count them", &["tool: Grep the logs for errors", "processing: Count them"]),
    ("- [ ] write tests\n- [x] fix the bug", &["processing: write tests", "processing: fix the bug"]),
    (
        "Step 1: gather requirements\nStep 2: write the design doc",
        &["processing: gather requirements", "processing: write the design doc"],
    ),
    ("(a) outline the talk\n(b) write the slides", &["processing: outline the talk", "processing: write the slides"]),
    (
        "- Fetch the page and then summarise it\n- Send the summary",
        &["tool: Fetch the page and then summarise it", "processing: Send the summary"],
    ),
    (
        "- Rewrite the intro so it\n  reads better\n- Fix typos",
        &["processing: Rewrite the intro so it reads better", "processing: Fix typos"],
    ),
    (
        "Here's what I need:\n- Set up CI\n- Add a README.md badge\n\nThanks!",
        &["processing: Set up CI", "processing: Add a README.md badge | +README.md"],
    ),
    (
        "# Plan\n## Steps\n* Research competitors\n* Draft the pitch deck",
        &["processing: Research competitors", "processing: Draft the pitch deck"],
    ),
    ("-\n- Write docs\n-", &["processing: Write docs"]),
    // Prose with connectors.
    (
        "Fetch the news, summarise it and email it to me",
        &["tool: Fetch the news", "processing: summarise it", "processing: email it to me"],
    ),
    (
        "Download https://example.com/data.csv, then clean it; afterwards plot a chart.",
        &[
            "tool: Download https://example.com/data.csv | @https://example.com/data.csv",
            "processing: clean it",
            "processing: plot a chart",
        ],
    ),
    (
        "Write the migration and then run it against the test database.",
        &["processing: Write the migration", "tool: run it against the test database"],
    ),
    (
        "Check the CI logs. If the build failed, fix it. After that, rerun the pipeline.",
        &["processing: Check the CI logs", "processing: If the build failed, fix it", "processing: Rerun the pipeline"],
    ),
    (
        "First, collect the logs. Next, find the errors. Finally, write a summary.",
        &["processing: Collect the logs", "processing: Find the errors", "processing: Write a summary"],
    ),
    (
        "Translate the document into French, e.g. for the Paris office. Then send it to Marie.",
        &["processing: Translate the document into French, e.g. for the Paris office", "processing: Send it to Marie"],
    ),
    (
        "create room333, add a most3s tool that finds filenames with most 3s, update the suggestion",
        &[
            "processing: create room333",
            "processing: add a most3s tool that finds filenames with most 3s",
            "processing: update the suggestion",
        ],
    ),
    ("Build and test the project", &["tool: Build and test the project"]),
    ("Book a flight to Paris and a hotel", &["processing: Book a flight to Paris and a hotel"]),
    ("Write a poem about the sea", &["processing: Write a poem about the sea"]),
    (
        "Scrape https://news.ycombinator.com; store the titles in ./notes.md",
        &[
            "tool: Scrape https://news.ycombinator.com | @https://news.ycombinator.com",
            "processing: store the titles in ./notes.md | +./notes.md",
        ],
    ),
    // Questions and open choices.
    ("Which database should we use?", &["clarification: Which database should we use?"]),
    ("What is the capital of France?", &["clarification: What is the capital of France?"]),
    ("Use Postgres or MySQL for storage", &["clarification: Use Postgres or MySQL for storage"]),
    ("Deploy to staging or production", &["clarification: Deploy to staging or production"]),
    ("Either refactor the parser or rewrite it.", &["clarification: Either refactor the parser or rewrite it"]),
    (
        "The budget is TBD. Prepare a draft anyway.",
        &["clarification: The budget is TBD", "processing: Prepare a draft anyway"],
    ),
    ("I'm not sure about the color scheme.", &["clarification: I'm not sure about the color scheme"]),
    (
        "Ask the user for their API key, then call the API.",
        &["clarification: Ask the user for their API key", "tool: call the API"],
    ),
    (
        "Compare https://a.example.com and https://b.example.com?",
        &[
            "clarification: Compare https://a.example.com and https://b.example.com? | @https://a.example.com | @https://b.example.com",
        ],
    ),
    ("Retry one or more times", &["processing: Retry one or more times"]),
    // Code and commands.
    ("Run `npm install && npm test`", &["tool: Run `npm install && npm test`"]),
    ("$ make release", &["tool: $ make release"]),
    ("npm run build", &["tool: npm run build"]),
    ("Test the login flow.", &["tool: Test the login flow"]),
    ("Tests should cover the login flow.", &["processing: Tests should cover the login flow"]),
    ("./scripts/build.sh --release", &["tool: ./scripts/build.sh --release | +./scripts/build.sh"]),
    (
        "curl https://api.example.com/v1/items | jq .",
        &["tool: curl https://api.example.com/v1/items | jq | @https://api.example.com/v1/items"],
    ),
    (
        "Run this:\n```\ncargo build --release\n```\nThen ship it.",
        &["tool: Run this:\n```\ncargo build --release\n```", "processing: Ship it"],
    ),
    (
        "Explain what `ls -la | grep x` prints. Keep it short.",
        &["tool: Explain what `ls -la | grep x` prints", "processing: Keep it short"],
    ),
    // Links and files.
    (
        "Visit https://en.wikipedia.org/wiki/Rust_(programming_language) and summarise it.",
        &[
            "tool: Visit https://en.wikipedia.org/wiki/Rust_(programming_language) | @https://en.wikipedia.org/wiki/Rust_(programming_language)",
            "processing: summarise it",
        ],
    ),
    (
        "Summarise ./notes.md and compare it with docs/spec.md",
        &["processing: Summarise ./notes.md | +./notes.md", "processing: compare it with docs/spec.md | +docs/spec.md"],
    ),
    (
        "Read ../data/input.csv. Next, compute the averages. Finally, write a report to ./out.md.",
        &[
            "processing: Read ../data/input.csv | +../data/input.csv",
            "processing: Compute the averages",
            "processing: Write a report to ./out.md",
        ],
    ),
    ("Analyse sales.xlsx and README.md", &["processing: Analyse sales.xlsx and README.md | +README.md"]),
    (
        "Summarise (see https://x.org/a?b=1, ./notes.md and ./notes.md).",
        &[
            "processing: Summarise (see https://x.org/a?b=1, ./notes.md and ./notes.md) | @https://x.org/a?b=1 | +./notes.md",
        ],
    ),
    (
        "Open HTTPS://Example.com/Path. Get http://x.io/y, http://x.io/y!",
        &[
            "tool: Open HTTPS://Example.com/Path | @HTTPS://Example.com/Path",
            "tool: Get http://x.io/y, http://x.io/y | @http://x.io/y",
        ],
    ),
    // Normalisation.
    ("  “Fetch”\u{a0}the   page — then\tsummarise it…  ", &["tool: \"Fetch\" the page - then summarise it"]),
    ("Fix it", &["processing: Fix it"]),
    ("rooms", &["processing: rooms"]),
    ("", &[]),
    ("  \n\t\r\n  ", &[]),
    ("Thanks!", &[]),
];

#[test]
fn requests_split_into_the_expected_steps() {
    assert!(CASES.len() >= 40);
    let mut failures = Vec::new();
    for (request, expected) in CASES {
        let got: Vec<String> = split(request, &exists).iter().map(show).collect();
        if got != *expected {
            failures.push(format!("{request:?}\n  expected {expected:#?}\n  got      {got:#?}"));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), CASES.len(), failures.join("\n"));
}

#[test]
fn the_seeds_example_gives_four_steps_with_the_link_on_the_third() {
    let steps = split(
        "Add login with session cookies. Use basic auth. Read API spec at https://example.com/spec.pdf. Then write unit tests.",
        &|_| false,
    );
    let texts: Vec<&str> = steps.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "Add login with session cookies",
            "Use basic auth",
            "Read API spec at https://example.com/spec.pdf",
            "Write unit tests"
        ]
    );
    let links: Vec<&[String]> = steps.iter().map(|s| s.links.as_slice()).collect();
    assert_eq!(links, [&[][..], &[], &["https://example.com/spec.pdf".to_owned()], &[]]);
}

#[test]
fn files_that_do_not_exist_are_not_attached() {
    let steps = split("Summarise ./missing.md and ./notes.md", &exists);
    assert_eq!(steps[0].files, ["./notes.md"]);
    let steps = split("Summarise ./notes.md", &|_| false);
    assert!(steps[0].files.is_empty());
}

#[test]
fn question_marks_inside_links_and_code_ask_nothing() {
    assert_eq!(classify("Summarise https://example.com/?page=2"), Kind::Processing);
    assert_eq!(classify("Explain `a ? b : c`"), Kind::Tool);
    assert_eq!(classify("Why does it fail?"), Kind::Clarification);
}

#[test]
fn kinds_parse_from_their_names() {
    for kind in Kind::ALL {
        assert_eq!(kind.as_str().parse::<Kind>(), Ok(kind));
    }
    assert_eq!("TOOL".parse::<Kind>(), Ok(Kind::Tool));
    let error = "robot".parse::<Kind>().unwrap_err();
    assert_eq!(error.to_string(), "`robot` is not a step kind");
}
